-- Drives Neovim's built-in LSP client against `lockaudit server` (tests/neovim.rs runs it):
-- open the fixture, wait for diagnostics, hover, apply the "classify" code action, write the
-- buffer, wait for the diagnostics to follow. What it saw goes to $LOCKAUDIT_OUT as JSON.
local bin = assert(os.getenv('LOCKAUDIT_BIN'))
local root = assert(os.getenv('LOCKAUDIT_ROOT'))
local file = assert(os.getenv('LOCKAUDIT_FILE'))
local out_path = assert(os.getenv('LOCKAUDIT_OUT'))
local out = {}

local function diagnostics(bufnr)
  local list = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(list, {
      lnum = d.lnum,
      col = d.col,
      code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code),
      source = d.source,
      severity = d.severity,
      message = d.message,
    })
  end
  return list
end

local function has_code(bufnr, code)
  for _, d in ipairs(diagnostics(bufnr)) do
    if d.code == code then return true end
  end
  return false
end

local function main()
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local config = { name = 'lockaudit', cmd = { bin, 'server' }, root_dir = root }
  local client_id
  if vim.lsp.start then
    client_id = vim.lsp.start(config)
  else
    -- Neovim 0.7 (Debian 12): the older API.
    client_id = vim.lsp.start_client(config)
    vim.lsp.buf_attach_client(bufnr, client_id)
  end
  assert(client_id, 'the client did not start')
  out.version = tostring(vim.version().major) .. '.' .. tostring(vim.version().minor)

  assert(vim.wait(30000, function() return has_code(bufnr, 'unclassified-lock') end, 20),
    'no unclassified-lock diagnostic arrived')
  out.initial = diagnostics(bufnr)

  -- Hover on the acquisition.
  local site_line
  for i, l in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if l:find('mgr.lock(', 1, true) then site_line = i end
  end
  vim.api.nvim_win_set_cursor(0, { site_line, 20 })
  local client = vim.lsp.get_client_by_id(client_id)
  local hover = client.request_sync('textDocument/hover', vim.lsp.util.make_position_params(), 10000, bufnr)
  out.hover = hover and hover.result and hover.result.contents and hover.result.contents.value

  -- The code action, through the editor's own menu (answered here).
  vim.ui.select = function(items, opts, on_choice)
    for i, item in ipairs(items) do
      local title = opts.format_item and opts.format_item(item) or tostring(item)
      if title:find('Classify this lock as efficiency', 1, true) then
        out.chosen = title
        on_choice(item, i)
        return
      end
    end
    out.offered = vim.tbl_map(function(it) return opts.format_item and opts.format_item(it) end, items)
    on_choice(nil, nil)
  end
  vim.lsp.buf.code_action()
  assert(vim.wait(10000, function()
    return vim.api.nvim_buf_get_lines(bufnr, site_line - 1, site_line, false)[1]:find('lockaudit: efficiency', 1, true) ~= nil
  end, 20), 'the code action was not applied')
  vim.cmd('write')
  assert(vim.wait(30000, function() return not has_code(bufnr, 'unclassified-lock') end, 20),
    'the diagnostics did not follow the edit')
  out.after = diagnostics(bufnr)
end

vim.api.nvim_create_autocmd('VimEnter', {
  callback = function()
    local ok, err = pcall(main)
    out.ok = ok
    if not ok then out.error = tostring(err) end
    local f = assert(io.open(out_path, 'w'))
    f:write(vim.fn.json_encode(out))
    f:close()
    vim.cmd('qall!')
  end,
})
