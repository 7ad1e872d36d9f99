#!/usr/bin/env bash
# End-to-end test of the Grounding VS Code extension in a real VS Code (code-server 4.100.3,
# which bundles VS Code 1.100.3), driven by headless Debian Chromium through playwright-core.
#
# Idempotent: every install step is skipped when its result is already there. Needs only the
# npm registry, Debian's apt repositories and PyPI. Run as root (it uses apt-get).
#
#   bash vscode-client/e2e/run.sh                         # defaults below
#   E2E_DRAFT=answers/other.md E2E_EXPECT_CODES=GR104,GR109 bash vscode-client/e2e/run.sh
#
# Environment (all optional):
#   E2E_WORKSPACE      folder opened in VS Code            (default: <repo>/examples)
#   E2E_DRAFT          draft to open, relative to it       (default: answers/stale.md; when missing,
#                      the first draft with a GR104 finding, else answers/*stale*.md, is used)
#   E2E_EXPECT_CODES   GR codes the Problems panel must list (default: GR104)
#   E2E_PORT           code-server port on 127.0.0.1       (default: 18765)
#   E2E_TIMEOUT        seconds to wait for each server result (default: 90)
#   E2E_SKIP_INSTALL=1 skip apt/code-server/pip installs (the build and the run still happen)
#   E2E_KEEP_RUNNING=1 leave code-server running after the test (prints its URL)
#   CODE_SERVER_VERSION (default 4.100.3), CODE_SERVER_PREFIX (default /opt/code-server-<version>)
#
# Output: screenshots in vscode-client/e2e/screenshots/, scratch state (user data, extensions,
# logs) in vscode-client/e2e/.work/ (both gitignored). Exit status 0 only if every check passed.
set -Eeuo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLIENT_DIR="$(cd "$E2E_DIR/.." && pwd)"
REPO_DIR="$(cd "$CLIENT_DIR/.." && pwd)"

CODE_SERVER_VERSION="${CODE_SERVER_VERSION:-4.100.3}"
CODE_SERVER_PREFIX="${CODE_SERVER_PREFIX:-/opt/code-server-$CODE_SERVER_VERSION}"
CODE_SERVER="$CODE_SERVER_PREFIX/node_modules/.bin/code-server"
E2E_WORKSPACE="${E2E_WORKSPACE:-$REPO_DIR/examples}"
E2E_DRAFT="${E2E_DRAFT:-answers/stale.md}"
E2E_EXPECT_CODES="${E2E_EXPECT_CODES:-GR104}"
E2E_PORT="${E2E_PORT:-18765}"
E2E_TIMEOUT="${E2E_TIMEOUT:-90}"
WORK="$E2E_DIR/.work"
SCREENSHOTS="$E2E_DIR/screenshots"
VSIX="$CLIENT_DIR/grounding-vscode.vsix"
# code-server's environment: its data and config dirs under $WORK, never in $HOME.
CS_ENV=(VSCODE_CLI=1 "XDG_DATA_HOME=$WORK/xdg" "XDG_CONFIG_HOME=$WORK/xdg" "XDG_CACHE_HOME=$WORK/xdg/cache")
APT_PACKAGES=(build-essential curl libkrb5-dev ripgrep chromium fonts-wqy-microhei)

START_TIME=$(date +%s)
step() { printf '\n\033[1;34m[e2e %4ss] == %s\033[0m\n' "$(($(date +%s) - START_TIME))" "$*"; }
info() { printf '[e2e %4ss]    %s\n' "$(($(date +%s) - START_TIME))" "$*"; }
die() { printf '\033[1;31m[e2e] FAILED: %s\033[0m\n' "$*" >&2; exit 1; }

CS_PID=""
cleanup() {
  local rc=$?
  if [[ -n "$CS_PID" ]] && kill -0 "$CS_PID" 2>/dev/null; then
    if [[ "${E2E_KEEP_RUNNING:-}" == 1 ]]; then
      info "code-server left running (pid $CS_PID): http://127.0.0.1:$E2E_PORT/?folder=$E2E_WORKSPACE"
    else
      # code-server runs in its own process group (setsid): stop it with its extension hosts,
      # language servers and watchers, and nothing else.
      info "stopping code-server (process group $CS_PID)"
      kill -TERM -- "-$CS_PID" 2>/dev/null || true
      local i
      for i in $(seq 1 20); do
        kill -0 -- "-$CS_PID" 2>/dev/null || break
        sleep 0.5
      done
      kill -KILL -- "-$CS_PID" 2>/dev/null || true
      wait "$CS_PID" 2>/dev/null || true
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT

# ------------------------------------------------------------------ 1. system packages
install_apt() {
  step "1/8 Debian packages: ${APT_PACKAGES[*]}"
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    info "already installed"
    return
  fi
  info "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ------------------------------------------------------------------ 2. code-server
# code-server's postinstall runs `npm install` in lib/vscode, where @vscode/ripgrep's postinstall
# downloads a ripgrep build from GitHub (not reachable here). Its download.js first looks for
# <os.tmpdir()>/vscode-ripgrep-cache-<package version>/ripgrep-<VERSION>-<target>.tar.gz (VERSION
# is a constant in lib/postinstall.js) and untars it, expecting `rg` at the archive's top level.
# We seed exactly that file from Debian's ripgrep.
#
# code-server is installed as a local package in $CODE_SERVER_PREFIX, not with `npm install -g`:
# npm exports npm_config_global=true to lifecycle scripts, so the nested `npm install` in
# lib/vscode would run in global mode and reinstall over the package being installed.
seed_ripgrep_cache() {
  local tarball="$1" tmp rg_version rg_tag target arch cache_dir asset
  tmp="$(mktemp -d)"
  tar -xzf "$tarball" -C "$tmp" package/lib/vscode/npm-shrinkwrap.json
  rg_version="$(node -e '
    const s = require(process.argv[1]);
    const p = s.packages && s.packages["node_modules/@vscode/ripgrep"];
    if (!p) { process.exit(1); }
    console.log(p.version);' "$tmp/package/lib/vscode/npm-shrinkwrap.json")" ||
    die "cannot find @vscode/ripgrep in code-server's npm-shrinkwrap.json"
  (cd "$tmp" && npm pack --silent "@vscode/ripgrep@$rg_version" >/dev/null)
  tar -xzf "$tmp"/vscode-ripgrep-*.tgz -C "$tmp" package/lib/postinstall.js
  rg_tag="$(sed -n "s/^const VERSION = '\(v[^']*\)'.*/\1/p" "$tmp/package/lib/postinstall.js")"
  [[ -n "$rg_tag" ]] || die "cannot read VERSION from @vscode/ripgrep@$rg_version lib/postinstall.js"
  arch="$(node -p 'process.arch')"
  case "$arch" in
    x64) target=x86_64-unknown-linux-musl ;;
    arm64) target=aarch64-unknown-linux-musl ;;
    *) die "unsupported architecture for the ripgrep cache: $arch" ;;
  esac
  cache_dir="$(node -p 'require("os").tmpdir()')/vscode-ripgrep-cache-$rg_version"
  asset="$cache_dir/ripgrep-$rg_tag-$target.tar.gz"
  mkdir -p "$cache_dir" "$tmp/rg"
  cp "$(command -v rg)" "$tmp/rg/rg"
  tar -czf "$asset" -C "$tmp/rg" rg
  info "seeded @vscode/ripgrep@$rg_version cache: $asset (from $(rg --version | head -1))"
  rm -rf "$tmp"
}

# Where node-gyp finds Node's headers. Without it node-gyp downloads them from the Node.js site
# into ~/.cache/node-gyp (no network here, and $HOME may be new): Debian's nodejs ships them in
# <prefix>/include/node, so point npm_config_nodedir at that prefix.
node_headers_dir() {
  local prefix
  prefix="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
  [[ -f "$prefix/include/node/node_api.h" && -f "$prefix/include/node/common.gypi" ]] ||
    die "Node.js headers are missing: $prefix/include/node/{node_api.h,common.gypi} (node-gyp needs them to build code-server's native modules; install Node.js with its headers)"
  echo "$prefix"
}

# code-server's version as it prints it ("4.100.3 <commit> with Code 1.100.3"), or "" when it does
# not run. Its first run may print other lines first ("Wrote default config file ..."), so the
# version is looked for on every line; --config and XDG_* keep it away from $HOME.
code_server_version() {
  [[ -x "$CODE_SERVER" ]] || return 0
  cs_env "$CODE_SERVER" --config "$WORK/config.yaml" --version 2>/dev/null |
    grep -m1 -E '^[0-9]+\.[0-9]+\.[0-9]+ [0-9a-f]{7,}' || true
}

# Runs a command with code-server's config, data and home-relative paths under $WORK.
cs_env() {
  env "${CS_ENV[@]}" "$@"
}

# What code-server's postinstall (postinstall.sh: `npm install` in lib/vscode and in
# lib/vscode/extensions, symlinks) and its dependencies' install scripts leave behind. An npm
# that skipped lifecycle scripts leaves none of it and says nothing, so each is checked by name.
# Prints one line per missing piece; prints nothing when the install is complete.
missing_postinstall() {
  local pkg="$CODE_SERVER_PREFIX/node_modules/code-server" vs d
  vs="$pkg/lib/vscode"
  [[ -f "$pkg/out/node/entry.js" ]] || echo "$pkg/out/node/entry.js (the package itself)"
  [[ -d "$vs/node_modules" ]] || echo "$vs/node_modules (postinstall.sh: npm install in lib/vscode)"
  [[ -L "$vs/node_modules.asar" ]] || echo "$vs/node_modules.asar (postinstall.sh: symlink)"
  [[ -e "$vs/bin/remote-cli/code-server" ]] || echo "$vs/bin/remote-cli/code-server (postinstall.sh: symlink)"
  [[ -e "$vs/bin/helpers/browser.sh" ]] || echo "$vs/bin/helpers/browser.sh (postinstall.sh: symlink)"
  [[ -d "$vs/extensions/node_modules" ]] || echo "$vs/extensions/node_modules (postinstall.sh: npm install in lib/vscode/extensions)"
  [[ -x "$vs/node_modules/@vscode/ripgrep/bin/rg" ]] || echo "$vs/node_modules/@vscode/ripgrep/bin/rg (@vscode/ripgrep postinstall)"
  # The native addons the Linux server loads (built by their install scripts, or shipped as
  # prebuilt optional packages): each must load in this Node.js.
  for d in node-pty @vscode/spdlog kerberos native-watchdog @parcel/watcher; do
    node -e 'require(process.argv[1])' "$vs/node_modules/$d" >/dev/null 2>&1 ||
      echo "$vs/node_modules/$d (native addon does not load: its install script did not run or failed)"
  done
  node -e 'require(require.resolve("argon2", { paths: [process.argv[1]] }))' "$pkg" >/dev/null 2>&1 ||
    echo "argon2 for $pkg (native addon does not load: its install script did not run or failed)"
}

install_code_server() {
  step "2/8 code-server $CODE_SERVER_VERSION in $CODE_SERVER_PREFIX"
  local version missing
  version="$(code_server_version)"
  if [[ "$version" == "$CODE_SERVER_VERSION "* ]]; then
    missing="$(missing_postinstall)"
    if [[ -z "$missing" ]]; then
      info "already installed: $version"
      return
    fi
    info "installed but incomplete, reinstalling; missing:"
    printf '%s\n' "$missing" | sed 's/^/      /'
  fi
  command -v rg >/dev/null || die "ripgrep (rg) is missing"
  local dl nodedir
  nodedir="$(node_headers_dir)"
  dl="$(mktemp -d)"
  info "fetching code-server@$CODE_SERVER_VERSION from the npm registry"
  (cd "$dl" && npm pack --silent "code-server@$CODE_SERVER_VERSION" >/dev/null)
  seed_ripgrep_cache "$dl/code-server-$CODE_SERVER_VERSION.tgz"
  rm -rf "$CODE_SERVER_PREFIX"
  mkdir -p "$CODE_SERVER_PREFIX"
  echo '{"name":"code-server-install","private":true}' >"$CODE_SERVER_PREFIX/package.json"
  info "npm install (builds native modules against $nodedir/include/node; takes a few minutes; log: $WORK/code-server-install.log)"
  # unsafe_perm: postinstall.sh refuses to run as root without it; yes: no prompts;
  # ignore_scripts=false: lifecycle scripts run whatever an npmrc says; foreground_scripts: their
  # output lands in the log.
  if ! (cd "$CODE_SERVER_PREFIX" &&
    npm_config_unsafe_perm=true npm_config_yes=true npm_config_ignore_scripts=false \
      npm_config_foreground_scripts=true npm_config_nodedir="$nodedir" \
      npm install --no-save --no-package-lock --no-audit --no-fund \
      "$dl/code-server-$CODE_SERVER_VERSION.tgz") >"$WORK/code-server-install.log" 2>&1; then
    tail -40 "$WORK/code-server-install.log" >&2
    die "code-server install failed (see $WORK/code-server-install.log)"
  fi
  rm -rf "$dl"
  missing="$(missing_postinstall)"
  if [[ -n "$missing" ]]; then
    printf '%s\n' "$missing" | sed 's/^/    missing: /' >&2
    die "npm installed code-server but its install scripts did not all run (see $WORK/code-server-install.log)"
  fi
  version="$(code_server_version)"
  if [[ "$version" != "$CODE_SERVER_VERSION "* ]]; then
    cs_env "$CODE_SERVER" --config "$WORK/config.yaml" --version >&2 || true
    die "code-server $CODE_SERVER_VERSION did not install: '$CODE_SERVER --version' printed no '$CODE_SERVER_VERSION <commit>' line"
  fi
  info "installed: $version"
}

# ------------------------------------------------------------------ 3. the Python package
install_python() {
  step "3/8 Python package: pip install -e $REPO_DIR"
  if ! python3 -m pip install -q --disable-pip-version-check -e "$REPO_DIR" >"$WORK/pip.log" 2>&1; then
    tail -20 "$WORK/pip.log" >&2
    info "WARNING: pip install -e $REPO_DIR failed; continuing with whatever 'grounding' is installed"
  fi
}

find_grounding() {
  local scripts
  scripts="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
  if [[ -x "$scripts/grounding" ]]; then
    GROUNDING_BIN="$scripts/grounding"
  elif command -v grounding >/dev/null; then
    GROUNDING_BIN="$(command -v grounding)"
  else
    die "no 'grounding' executable (pip install -e $REPO_DIR did not provide one)"
  fi
  info "grounding executable: $GROUNDING_BIN"
}

# ------------------------------------------------------------------ 4. the extension
build_vsix() {
  step "4/8 build the extension: npm ci, typecheck, lint, package"
  local stamp="$CLIENT_DIR/node_modules/.e2e-lock-sha" sha
  sha="$(sha256sum "$CLIENT_DIR/package-lock.json" | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$sha" ]]; then
    info "node_modules matches package-lock.json: skipping npm ci"
  else
    (cd "$CLIENT_DIR" && npm ci --no-audit --no-fund >"$WORK/npm-ci.log" 2>&1) ||
      { tail -30 "$WORK/npm-ci.log" >&2; die "npm ci failed"; }
    echo "$sha" >"$stamp"
  fi
  (cd "$CLIENT_DIR" && npm run --silent typecheck && npm run --silent lint && npm run --silent package >"$WORK/package.log" 2>&1) ||
    { cat "$WORK/package.log" >&2; die "typecheck, lint or packaging failed"; }
  info "built $VSIX ($(stat -c %s "$VSIX") bytes)"
}

# ------------------------------------------------------------------ 5. a fresh VS Code profile
prepare_profile() {
  step "5/8 fresh user data, extensions dir and settings in $WORK"
  rm -rf "$WORK/user-data" "$WORK/extensions" "$WORK/chromium" "$WORK/xdg"
  mkdir -p "$WORK/user-data/User" "$WORK/extensions" "$WORK/chromium" "$WORK/xdg" "$SCREENSHOTS"
  rm -f "$SCREENSHOTS"/*.png
  cs_env "$CODE_SERVER" --config "$WORK/config.yaml" --user-data-dir "$WORK/user-data" \
    --extensions-dir "$WORK/extensions" --install-extension "$VSIX" --force >"$WORK/install-extension.log" 2>&1 ||
    { cat "$WORK/install-extension.log" >&2; die "installing the .vsix into code-server failed"; }
  info "$(grep -i 'success\|installed' "$WORK/install-extension.log" | head -1)"
  cs_env "$CODE_SERVER" --config "$WORK/config.yaml" --user-data-dir "$WORK/user-data" \
    --extensions-dir "$WORK/extensions" --list-extensions --show-versions 2>/dev/null | sed 's/^/    extension: /'
  # grounding.server.path is machine-overridable: in a remote window (code-server is one) VS Code
  # reads such settings from the Remote ("Machine") settings, not from the browser's User settings.
  mkdir -p "$WORK/user-data/Machine"
  cat >"$WORK/user-data/Machine/settings.json" <<EOF
{
  "grounding.server.path": "$GROUNDING_BIN"
}
EOF
  cat >"$WORK/user-data/User/settings.json" <<EOF
{
  "grounding.trace.server": "messages",
  "security.workspace.trust.enabled": true,
  "security.workspace.trust.startupPrompt": "always",
  "security.workspace.trust.untrustedFiles": "open",
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.enableExperiments": false,
  "workbench.welcomePage.walkthroughs.openOnInstall": false,
  "workbench.colorTheme": "Default Light Modern",
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoUpdate": false,
  "extensions.autoCheckUpdates": false,
  "extensions.ignoreRecommendations": true,
  "git.enabled": false,
  "editor.hover.delay": 200,
  "editor.minimap.enabled": false,
  "files.autoSave": "off",
  "window.restoreWindows": "none",
  "chat.commandCenter.enabled": false
}
EOF
}

# ------------------------------------------------------------------ 6. start code-server
start_code_server() {
  step "6/8 start code-server on 127.0.0.1:$E2E_PORT"
  if curl -fsS -o /dev/null "http://127.0.0.1:$E2E_PORT/healthz" 2>/dev/null; then
    die "port $E2E_PORT is already serving something; set E2E_PORT"
  fi
  # setsid and env both exec: $! is code-server's pid and its process group id.
  setsid env "${CS_ENV[@]}" "$CODE_SERVER" --config "$WORK/config.yaml" --auth none --bind-addr "127.0.0.1:$E2E_PORT" \
    --disable-telemetry --disable-update-check --disable-getting-started-override \
    --ignore-last-opened >"$WORK/code-server.log" 2>&1 &
  CS_PID=$!
  local i
  for i in $(seq 1 60); do
    if curl -fsS -o /dev/null "http://127.0.0.1:$E2E_PORT/healthz" 2>/dev/null; then
      info "code-server is up (pid $CS_PID) after ${i}s"
      return
    fi
    kill -0 "$CS_PID" 2>/dev/null || { cat "$WORK/code-server.log" >&2; die "code-server exited"; }
    sleep 1
  done
  cat "$WORK/code-server.log" >&2
  die "code-server did not answer on 127.0.0.1:$E2E_PORT"
}

# ------------------------------------------------------------------ 7. the browser test
run_browser() {
  step "7/8 drive VS Code in headless Chromium (playwright-core)"
  local rc=0
  E2E_URL="http://127.0.0.1:$E2E_PORT" E2E_WORKSPACE="$E2E_WORKSPACE" E2E_DRAFT="$E2E_DRAFT" \
    E2E_EXPECT_CODES="$E2E_EXPECT_CODES" E2E_TIMEOUT="$E2E_TIMEOUT" E2E_SCREENSHOTS="$SCREENSHOTS" \
    E2E_CHROMIUM_PROFILE="$WORK/chromium" E2E_GROUNDING="$GROUNDING_BIN" E2E_USER_DATA="$WORK/user-data" \
    node "$E2E_DIR/e2e.mjs" || rc=$?
  step "8/8 logs"
  local log
  log="$(find "$WORK/user-data/logs" -name '*Grounding*.log' 2>/dev/null | head -1 || true)"
  if [[ -n "$log" ]]; then
    info "Grounding output channel ($log), last 40 lines:"
    tail -40 "$log" | sed 's/^/    | /'
  else
    info "no Grounding output channel log found under $WORK/user-data/logs"
  fi
  info "screenshots: $SCREENSHOTS"
  ls -1 "$SCREENSHOTS" | sed 's/^/    /'
  info "total time: $(($(date +%s) - START_TIME))s"
  return "$rc"
}

# code-server's own config file: every code-server invocation gets --config, so none reads or
# writes ~/.config/code-server (its first run would write a default one there and say so).
write_config() {
  mkdir -p "$WORK/xdg"
  cat >"$WORK/config.yaml" <<EOF
bind-addr: 127.0.0.1:$E2E_PORT
auth: none
cert: false
disable-telemetry: true
disable-update-check: true
user-data-dir: $WORK/user-data
extensions-dir: $WORK/extensions
EOF
}

mkdir -p "$WORK" "$SCREENSHOTS"
write_config
info "repo $REPO_DIR, workspace $E2E_WORKSPACE, draft $E2E_DRAFT, expect $E2E_EXPECT_CODES"
if [[ "${E2E_SKIP_INSTALL:-}" != 1 ]]; then
  install_apt
  install_code_server
  install_python
else
  step "1-3/8 installs skipped (E2E_SKIP_INSTALL=1)"
fi
[[ -x "$CODE_SERVER" ]] || die "code-server is not installed at $CODE_SERVER"
if missing="$(missing_postinstall)" && [[ -n "$missing" ]]; then
  printf '%s\n' "$missing" | sed 's/^/    missing: /' >&2
  die "code-server in $CODE_SERVER_PREFIX is incomplete (run without E2E_SKIP_INSTALL=1 to reinstall it)"
fi
find_grounding
build_vsix
prepare_profile
start_code_server
run_browser
