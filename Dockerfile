# needle-action: the GitHub Action's container. docs/container.md has the layout, the measured size
# and build time, and why the action runs as root.
#
#   docker build -t needle-action .                                 # default: tiktoken + API providers
#   docker build --build-arg NEEDLE_EXTRAS=local -t needle-action . # + embedded Gemma (compiles llama.cpp, ~7 min)
#
# One stage, on purpose: GitHub rebuilds a Docker action's image on every job, so build time is
# paid on every pull request. A two-stage variant spent over two more minutes here on its second
# apt run and on copying the venv across; what a build stage would leave behind (bpe-openai, the
# compiler for [local]) is instead removed in the same RUN that brought it in.

FROM debian:bookworm-slim

ARG NEEDLE_EXTRAS=""
ARG DEBIAN_FRONTEND=noninteractive
ENV PATH=/opt/needle/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

# python3: Debian bookworm's is 3.11, the version the package targets; it lives in a venv so that
# pip never touches the system Python. git: the base-branch comparison runs `git worktree` and
# `git fetch`. libgomp1: llama.cpp's OpenMP runtime, only with the [local] extra.
# safe.directory: the runner mounts the checkout (owned by the runner's uid, not root) at
# /github/workspace, and git refuses a repository owned by someone else ("dubious ownership").
# dpkg excludes: the official slim image already drops docs, man pages and translations of the
# packages it ships; this extends that to the packages installed here, whatever the base.
# The venv has no pip of its own (23 MB): pip runs from the wheel python3-venv ships ($PIP below).
# hadolint ignore=DL3008
RUN printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
      'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/locale/*' > /etc/dpkg/dpkg.cfg.d/needle-slim \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv git ca-certificates \
 && case ",${NEEDLE_EXTRAS}," in *,local,*) apt-get install -y --no-install-recommends libgomp1;; esac \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv --without-pip /opt/needle \
 && ln -s /usr/share/python-wheels/pip-*.whl /opt/pip.whl \
 && git config --system --add safe.directory /github/workspace
ENV PIP="/opt/needle/bin/python /opt/pip.whl/pip"

# Dependencies first, from pyproject.toml alone, so this layer is reused for as long as the
# dependency list does not change, whatever happens to the code. In the same RUN:
# - bake tiktoken's BPE files. The runner may have no route to openaipublic.blob.core.windows.net,
#   and a download would cost every run. bpe-openai (a dependency) ships the same files gzipped;
#   tiktoken_cache.py (stdlib only) writes them under tiktoken's cache names after checking each
#   against tiktoken's own sha256, and both encodings are loaded once to prove they work offline.
#   Then bpe-openai (75 MB installed) goes: the baked cache replaces it at run time.
# - [local] only: the compiler llama-cpp-python needs is installed and purged again.
COPY pyproject.toml needle_action/tokens/tiktoken_cache.py /tmp/needle-deps/
# hadolint ignore=DL3008
RUN case ",${NEEDLE_EXTRAS}," in *,local,*) apt-get update \
      && apt-get install -y --no-install-recommends build-essential cmake;; esac \
 && python3 -c 'import os, tomllib; p = tomllib.load(open("/tmp/needle-deps/pyproject.toml", "rb"))["project"]; \
extras = [e.strip() for e in os.environ.get("NEEDLE_EXTRAS", "").split(",") if e.strip()]; \
print("\n".join(p["dependencies"] + [r for e in extras for r in p["optional-dependencies"][e]]))' \
    > /tmp/needle-deps/requirements.txt \
 && $PIP install -r /tmp/needle-deps/requirements.txt \
 && python /tmp/needle-deps/tiktoken_cache.py /opt/needle/tiktoken \
 && TIKTOKEN_CACHE_DIR=/opt/needle/tiktoken python -c \
    "import tiktoken; [tiktoken.get_encoding(e) for e in ('o200k_base', 'cl100k_base')]" \
 && $PIP uninstall -y bpe-openai \
 && case ",${NEEDLE_EXTRAS}," in *,local,*) apt-get purge -y --auto-remove build-essential cmake \
      && apt-get clean && rm -rf /var/lib/apt/lists/*;; esac \
 && rm -rf /tmp/needle-deps

# The package itself; its dependencies are already in place.
COPY pyproject.toml README.md /tmp/needle-src/
COPY needle_action /tmp/needle-src/needle_action
RUN $PIP install --no-deps /tmp/needle-src && rm -rf /tmp/needle-src

COPY entrypoint.py /app/entrypoint.py

# DL3064 flags the "TOKEN" inside TIKTOKEN_CACHE_DIR: a folder path, not a secret.
# hadolint ignore=DL3064
ENV TIKTOKEN_CACHE_DIR=/opt/needle/tiktoken \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# No USER: GitHub runs a Docker action as the image's user, with the workspace and the
# file-command files (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY) owned by the runner's uid 1001; GitHub's
# docs require the default (root) user so the action can write them. See docs/container.md.
ENTRYPOINT ["/opt/needle/bin/python", "/app/entrypoint.py"]
