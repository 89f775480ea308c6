#!/bin/sh
# Install the real agent CLIs the deep profile runs: install_agents.sh [PREFIX] [--node]
#
# PREFIX (default /opt/yyb-agents) gets one venv per Python CLI, made with the system
# interpreter /usr/bin/python3: the sandbox shows only /usr, /etc and the declared read-only
# paths, so neither the interpreter nor the venv may live under /root or /home. With --node
# (or YYB_AGENTS_NODE=1), Claude Code and Codex are installed with npm into PREFIX/node.
# Idempotent: a CLI whose executable already runs is left alone. Prints one line per CLI:
# its name, its executable's path, the seconds and the MiB its install took.
set -eu

prefix=/opt/yyb-agents
node=${YYB_AGENTS_NODE:-0}
for arg in "$@"; do
  case $arg in
    --node) node=1 ;;
    -*) echo "install_agents.sh: unknown option $arg" >&2; exit 2 ;;
    *) prefix=$arg ;;
  esac
done
python=/usr/bin/python3
mkdir -p "$prefix"

make_venv() {
  # A venv from the system interpreter; Debian's python3-venv brings ensurepip.
  if ! "$python" -c 'import ensurepip' 2>/dev/null; then
    apt-get install -y -q python3-venv >/dev/null
  fi
  "$python" -m venv "$1"
}

report() {
  # NAME EXECUTABLE FOLDER STARTED: one line for a finished install.
  took=$(( $(date +%s) - $4 ))
  size=$(du -sm "$3" | cut -f1)
  echo "$1 $2 ${took}s ${size}MiB"
}

python_cli() {
  # NAME PACKAGE EXECUTABLE: a PyPI package into its own venv PREFIX/NAME.
  folder=$prefix/$1
  exe=$folder/bin/$3
  started=$(date +%s)
  if ! [ -x "$exe" ] || ! "$exe" --help >/dev/null 2>&1; then
    rm -rf "$folder"
    make_venv "$folder"
    # pip's output goes to a log beside the venv, shown only when the install fails.
    if ! "$folder/bin/pip" install -q --disable-pip-version-check "$2" \
      >"$prefix/$1.install.log" 2>&1; then
      cat "$prefix/$1.install.log" >&2
      exit 1
    fi
  fi
  report "$1" "$exe" "$folder" "$started"
}

node_cli() {
  # NAME PACKAGE EXECUTABLE: an npm package into PREFIX/node.
  exe=$prefix/node/bin/$3
  started=$(date +%s)
  if ! [ -x "$exe" ] || ! "$exe" --version >/dev/null 2>&1; then
    if ! npm install -g --no-fund --no-audit --prefix "$prefix/node" "$2" \
      >"$prefix/$1.install.log" 2>&1; then
      cat "$prefix/$1.install.log" >&2
      exit 1
    fi
  fi
  report "$1" "$exe" "$prefix/node" "$started"
}

python_cli mini-swe-agent mini-swe-agent mini
python_cli aider aider-chat aider
if [ "$node" = 1 ]; then
  node_cli claude-code @anthropic-ai/claude-code claude
  node_cli codex @openai/codex codex
fi
