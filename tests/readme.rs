//! README's rules table is documentation users read; it must list every rule with its default.

#[test]
fn readme_rules_table_lists_every_rule() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    for r in lockaudit::lints::RULES {
        let row = format!("| `{}` | {} |", r.id, r.default_level.as_str());
        assert!(readme.contains(&row), "README's rules table lacks `{row}`");
    }
}
