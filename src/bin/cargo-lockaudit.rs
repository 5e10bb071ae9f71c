//! `cargo lockaudit …`: cargo runs `cargo-lockaudit lockaudit …`; the same program as `lockaudit`.

#[path = "../main.rs"]
mod lockaudit_main;

fn main() -> std::process::ExitCode {
    lockaudit_main::main()
}
