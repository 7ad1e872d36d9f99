-- Headless driver for the user configurations in editors/nvim/ (tests/e2e/test_neovim.py).
-- It loads one configuration file exactly as a writer installs it, opens a draft, then plays
-- a script of editor actions through Neovim's own LSP client -- the key mappings' functions
-- (vim.lsp.buf.hover/definition/code_action), omnifunc completion in Insert mode, the
-- configuration's :Grounding* commands -- and writes what the editor ended up with as JSON.
--
-- Run:  nvim --headless --clean -n -u drive.lua FILE
-- Environment (set by the test):
--   GROUNDING_CONFIG   the configuration file to load (editors/nvim/*.lua)
--   GROUNDING_PYTHON   set as vim.g.grounding_python (the server runs as PYTHON -m grounding.cli lsp)
--   GROUNDING_SCRIPT   a JSON file: a list of steps (below)
--   GROUNDING_RESULT   where to write the JSON result {nvim, steps: [...], error?, finished}
--                      (rewritten after every step)
--   GROUNDING_WAIT_MS  upper bound for each wait (default 20000)
--   GROUNDING_HIDE_ENABLE  "1": hide vim.lsp.config/enable so a 0.11 runs the 0.10 code path
--
-- Steps ({op = ..., id = ..., at = {LINE, BYTE}}: `id` is copied to the step's result; `at`
-- puts the cursor there first: 1-based line, 0-based byte):
--   diagnostics {after_edit?}  wait for a publishDiagnostics of the buffer (after_edit: one
--                              newer than the last edit step); record vim.diagnostic.get()
--   hover {keys?}              type KEYS (e.g. K) or call vim.lsp.buf.hover(); record the
--                              floating window's lines
--   definition {keys?}         type KEYS (gd) or call vim.lsp.buf.definition(); record where
--                              the cursor landed
--   back                       return to the draft's buffer
--   code_action {title, keys?} type KEYS or call vim.lsp.buf.code_action(), choosing
--                              (vim.ui.select) the first
--                              action whose title contains TITLE; record titles and lines
--   complete {keys, accept?}   feed KEYS in Insert mode then CTRL-X CTRL-O; record the
--                              completion items; accept the item whose abbr is ACCEPT
--                              (CTRL-N..., CTRL-Y) or cancel (CTRL-E); <Esc>; record the line
--   ex {command, wait}         run an Ex command; wait = "qflist" (quickfix list filled),
--                              "changed" (buffer changed) or "notify" (a vim.notify message,
--                              recorded as `message`); record the result
-- Every wait is vim.wait on a condition, never a sleep. A Lua error in a step is recorded in
-- that step as "error"; Neovim's last error message during a step as "errmsg".

local env = vim.env
local wait_ms = tonumber(env.GROUNDING_WAIT_MS or '') or 20000
local published = {} -- uri -> list of {version, count} per publication, in arrival order

local function count_of(uri) return #(published[uri] or {}) end

-- Record what the configuration tells the writer through vim.notify (the default still runs).
local notified = {}
local default_notify = vim.notify
vim.notify = function(message, ...)
  table.insert(notified, message)
  return default_notify(message, ...)
end

-- Wrap the publishDiagnostics handler to count publications (the default still runs).
local function wrap_publish()
  local default = vim.lsp.handlers['textDocument/publishDiagnostics']
  vim.lsp.handlers['textDocument/publishDiagnostics'] = function(err, result, ctx, cfg)
    default(err, result, ctx, cfg)
    if result and result.uri then
      published[result.uri] = published[result.uri] or {}
      table.insert(published[result.uri], { version = result.version, n = #result.diagnostics })
    end
  end
end
wrap_publish()

if env.GROUNDING_HIDE_ENABLE == '1' then
  rawset(vim.lsp, 'config', false)
  rawset(vim.lsp, 'enable', false)
end
vim.g.grounding_python = env.GROUNDING_PYTHON
dofile(env.GROUNDING_CONFIG)

local function grounding_client(bufnr)
  local get = vim.lsp.get_clients or function(filter) return vim.lsp.buf_get_clients(filter.bufnr) end
  for _, client in pairs(get({ bufnr = bufnr })) do
    if client.name == 'grounding' then return client end
  end
end

local function floats()
  local found = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= '' then table.insert(found, win) end
  end
  return found
end

local function close_floats()
  for _, win in ipairs(floats()) do pcall(vim.api.nvim_win_close, win, true) end
end

local function lines_of(bufnr)
  return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
end

local function feed(keys, mode)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), mode, false)
end

local draft -- the draft's buffer number
local last_edit_count = 0

local steps = {}

function steps.diagnostics(step, out)
  local uri = vim.uri_from_bufnr(draft)
  local after = step.after_edit and last_edit_count or 0
  out.published = vim.wait(wait_ms, function() return count_of(uri) > after end, 20)
  local client = grounding_client(draft)
  out.attached = client ~= nil
  if client then
    out.offset_encoding = client.offset_encoding
    out.root_dir = client.config.root_dir
  end
  out.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(draft)) do
    table.insert(out.diagnostics, {
      lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
      severity = d.severity, source = d.source, message = d.message,
      code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code),
    })
  end
  out.omnifunc = vim.bo[draft].omnifunc
end

-- With `keys` (the configuration's mapping, e.g. K) the step types them; else it calls the
-- function the mapping is documented to run.
local function press(step, fallback)
  if step.keys then feed(step.keys, 'x') else fallback() end
end

function steps.hover(step, out)
  close_floats()
  press(step, vim.lsp.buf.hover)
  out.shown = vim.wait(wait_ms, function() return #floats() > 0 end, 20)
  local win = floats()[1]
  if win then out.lines = lines_of(vim.api.nvim_win_get_buf(win)) end
  close_floats()
end

function steps.definition(step, out)
  local before = { vim.api.nvim_get_current_buf(), vim.api.nvim_win_get_cursor(0)[1] }
  press(step, vim.lsp.buf.definition)
  out.moved = vim.wait(wait_ms, function()
    return vim.api.nvim_get_current_buf() ~= before[1] or vim.api.nvim_win_get_cursor(0)[1] ~= before[2]
  end, 20)
  -- Let the response handler finish (it moves the cursor after switching buffers).
  vim.wait(200, function() return false end, 20)
  local bufnr = vim.api.nvim_get_current_buf()
  out.name = vim.api.nvim_buf_get_name(bufnr)
  out.line = vim.api.nvim_win_get_cursor(0)[1]
  out.text = vim.api.nvim_get_current_line()
  out.line_count = vim.api.nvim_buf_line_count(bufnr)
  out.readonly = vim.bo[bufnr].readonly
  out.modifiable = vim.bo[bufnr].modifiable
  out.filetype = vim.bo[bufnr].filetype
  out.attached = grounding_client(bufnr) ~= nil
end

function steps.back(_, out)
  vim.cmd('silent! only')
  vim.api.nvim_set_current_buf(draft)
  out.name = vim.api.nvim_buf_get_name(draft)
end

function steps.code_action(step, out)
  out.titles = {}
  local chosen = false
  local original = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    for _, item in ipairs(items) do
      local title = opts.format_item and opts.format_item(item) or tostring(item)
      table.insert(out.titles, title)
    end
    for _, item in ipairs(items) do
      local title = opts.format_item and opts.format_item(item) or tostring(item)
      if not chosen and title:find(step.title, 1, true) then
        chosen = true
        out.chosen = title
        on_choice(item)
        return
      end
    end
    on_choice(nil)
  end
  local tick = vim.api.nvim_buf_get_changedtick(draft)
  last_edit_count = count_of(vim.uri_from_bufnr(draft))
  local ok, err = pcall(function()
    press(step, vim.lsp.buf.code_action)
    out.offered = vim.wait(wait_ms, function() return #out.titles > 0 end, 20)
    out.applied = vim.wait(wait_ms, function()
      return vim.api.nvim_buf_get_changedtick(draft) ~= tick
    end, 20)
  end)
  vim.ui.select = original
  if not ok then error(err) end
  out.lines = lines_of(draft)
end

function steps.complete(step, out)
  local items
  local finished = false -- scheduled ticks may queue up: only the first one acts
  local timer = vim.loop.new_timer()
  local started = vim.loop.now()
  timer:start(20, 20, vim.schedule_wrap(function()
    if finished then return end
    local info = vim.fn.complete_info({ 'items', 'selected' })
    local timed_out = vim.loop.now() - started > wait_ms
    if not (info.items and #info.items > 0) and not timed_out then return end
    finished = true
    timer:stop()
    items = info.items or {}
    local keys = '<C-e>'
    for index, item in ipairs(items) do
      if step.accept and item.abbr == step.accept then
        -- CTRL-N from the selected item (-1: none) to this one, then CTRL-Y accepts it.
        keys = string.rep('<C-n>', (index - 1) - info.selected) .. '<C-y>'
        out.accepted = item.abbr
        break
      end
    end
    feed(keys .. '<Esc>', 'n')
  end))
  -- 'x!' runs the keys and stays in Insert mode (processing events, so the server's answer
  -- arrives) until the timer above leaves it.
  feed(step.keys .. '<C-x><C-o>', 'x!')
  timer:close()
  out.items = {}
  for _, item in ipairs(items or {}) do
    table.insert(out.items, { word = item.word, abbr = item.abbr, menu = item.menu,
      info = item.info, kind = item.kind })
  end
  out.mode = vim.api.nvim_get_mode().mode
  out.line = vim.api.nvim_get_current_line()
end

function steps.ex(step, out)
  local tick = vim.api.nvim_buf_get_changedtick(draft)
  last_edit_count = count_of(vim.uri_from_bufnr(draft))
  vim.fn.setqflist({}, 'r')
  local messages = #notified
  vim.cmd(step.command)
  if step.wait == 'notify' then
    out.done = vim.wait(wait_ms, function() return #notified > messages end, 20)
    out.message = notified[#notified]
  elseif step.wait == 'qflist' then
    out.done = vim.wait(wait_ms, function() return #vim.fn.getqflist() > 0 end, 20)
    out.qflist = {}
    for _, item in ipairs(vim.fn.getqflist()) do
      table.insert(out.qflist, { file = vim.api.nvim_buf_get_name(item.bufnr), lnum = item.lnum,
        text = item.text })
    end
  elseif step.wait == 'changed' then
    out.done = vim.wait(wait_ms, function()
      return vim.api.nvim_buf_get_changedtick(draft) ~= tick
    end, 20)
    out.lines = lines_of(draft)
  end
end

local function write(result)
  local file = assert(io.open(env.GROUNDING_RESULT .. '.part', 'w'))
  file:write(vim.fn.json_encode(result))
  file:close()
  assert(os.rename(env.GROUNDING_RESULT .. '.part', env.GROUNDING_RESULT))
end

local function run()
  local v = vim.version()
  local result = { nvim = string.format('%d.%d.%d', v.major, v.minor, v.patch), steps = {} }
  local ok, err = pcall(function()
    draft = vim.api.nvim_get_current_buf()
    result.uri = vim.uri_from_bufnr(draft)
    local file = assert(io.open(env.GROUNDING_SCRIPT, 'r'))
    local script = vim.fn.json_decode(file:read('*a'))
    file:close()
    for _, step in ipairs(script) do
      local out = { op = step.op, id = step.id }
      local started = vim.loop.hrtime()
      vim.v.errmsg = ''
      local step_ok, step_err = pcall(function()
        if step.at then
          vim.cmd('silent! only') -- e.g. the quickfix window :GroundingConflicts opened
          vim.api.nvim_set_current_buf(draft)
          vim.api.nvim_win_set_cursor(0, { step.at[1], step.at[2] })
        end
        steps[step.op](step, out)
      end)
      if not step_ok then out.error = tostring(step_err) end
      if vim.v.errmsg ~= '' then out.errmsg = vim.v.errmsg end
      out.ms = math.floor((vim.loop.hrtime() - started) / 1e6)
      table.insert(result.steps, out)
      write(result) -- after every step, so a run that hangs still shows how far it got
    end
  end)
  if not ok then result.error = tostring(err) end
  result.finished = true
  write(result)
  local all = vim.lsp.get_clients or vim.lsp.get_active_clients
  for _, client in pairs(all()) do vim.lsp.stop_client(client.id) end
  vim.wait(3000, function() return #all() == 0 end, 20)
  vim.cmd('qall!')
end

vim.api.nvim_create_autocmd('VimEnter', { callback = function() vim.schedule(run) end })
