# needle-action: the GitHub Action's container. docs/container.md has the layout, where the bytes and
# the seconds go, and why the action runs as root. Releases publish it pre-built to GHCR
# (.github/workflows/release.yml), so users pull it instead of building it on every job.
#
#   docker build -t needle-action .                                 # default: tiktoken + API providers + clouds
#   docker build --build-arg NEEDLE_EXTRAS=local -t needle-action . # + embedded Gemma (compiles llama.cpp, ~7 min)
#
# One stage, on purpose: a two-stage variant spent over two more minutes on its second apt run and
# on copying the venv across; what a build stage would leave behind (bpe-openai, the build backend,
# the compiler for [local]) is instead removed in the same RUN that brought it in.
#
# Every Python distribution comes from a hashed lock (requirements/*.txt, made by scripts/lock) and
# is installed with --require-hashes --no-deps: what runs next to the user's keys is exactly what
# was reviewed. The base is pinned by digest (the multi-arch index of debian:bookworm-slim, from
# docker-library/repo-info); Dependabot proposes new digests.
ARG BASE_IMAGE=debian:bookworm-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241
FROM ${BASE_IMAGE}

ARG NEEDLE_EXTRAS=""
ARG DEBIAN_FRONTEND=noninteractive
ENV PATH=/opt/needle/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

# python3: Debian bookworm's is 3.11, the version the package targets; it lives in a venv so that
# pip never touches the system Python. git: the base-branch comparison runs `git worktree`,
# `git fetch` (https: git-remote-https) and, for the data branch, `git push`. libgomp1: llama.cpp's
# OpenMP runtime, only with the [local] extra.
# safe.directory: the runner mounts the checkout (owned by the runner's uid, not root) at
# /github/workspace, and git refuses a repository owned by someone else ("dubious ownership").
# dpkg excludes: the official slim image already drops docs, man pages and translations of the
# packages it ships; this extends that to the packages installed here, whatever the base.
# What the action never runs goes in the same RUN (docs/container.md, "Where the bytes go"):
# - perl (~47 MB): Debian's git depends on it only for scripts the action does not call (svn, p4,
#   send-email, ...); every git command needle runs is built into the git binary. Removed with
#   --force-depends, so `apt-get install` in an image built FROM this one first reinstalls it.
# - git's helpers for serving and pushing over other transports (~15 MB: daemon, http-backend,
#   http-push, imap-send, shell, scalar) and the second copy of the git binary in git-core.
# The venv has no pip of its own (23 MB): pip runs from the wheel python3-venv ships ($PIP below).
# hadolint ignore=DL3008
RUN printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright' \
      'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/locale/*' > /etc/dpkg/dpkg.cfg.d/needle-slim \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv git ca-certificates \
 && case ",${NEEDLE_EXTRAS}," in *,local,*) apt-get install -y --no-install-recommends libgomp1;; esac \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/debconf/*-old /var/log/apt /var/log/dpkg.log \
 && case ",${NEEDLE_EXTRAS}," in *,local,*) ;; *) \
      dpkg --purge --force-depends perl perl-modules-5.36 libperl5.36 liberror-perl;; esac \
 && rm -rf /usr/share/perl5/Git* /usr/share/gitweb \
 && for f in git-daemon git-http-backend git-http-push git-http-fetch git-imap-send git-shell scalar \
      git-cvsserver git-svn git-p4 git-send-email git-archimport git-cvsimport git-cvsexportcommit \
      git-instaweb git-request-pull git-filter-branch git-quiltimport; do rm -f "/usr/lib/git-core/$f"; done \
 && ln -sf /usr/bin/git /usr/lib/git-core/git \
 && git --version && git -c init.defaultBranch=x init -q /tmp/probe && rm -rf /tmp/probe \
 && python3 -m venv --without-pip /opt/needle \
 && ln -s /usr/share/python-wheels/pip-*.whl /opt/pip.whl \
 && git config --system --add safe.directory /github/workspace
ENV PIP="/opt/needle/bin/python /opt/pip.whl/pip"

# Dependencies first, from the lock alone, so this layer is reused for as long as the lock does not
# change, whatever happens to the code. --require-hashes --no-deps: every distribution is named and
# hashed in the lock, nothing is resolved here; `pip check` then proves the lock is complete.
# In the same RUN:
# - bake tiktoken's BPE files. The runner may have no route to openaipublic.blob.core.windows.net,
#   and a download would cost every run. bpe-openai (a dependency) ships the same files gzipped;
#   tiktoken_cache.py (stdlib only) writes them under tiktoken's cache names after checking each
#   against tiktoken's own sha256, and both encodings are loaded once to prove they work offline.
#   Then bpe-openai (75 MB installed) goes: the baked cache replaces it at run time.
# - [local] only: the compiler llama-cpp-python needs is installed and purged again (perl with it);
#   llama.cpp is built for a portable CPU level, never the build machine's AMX/AVX-512 kernels
#   (CMAKE_ARGS, the README's own; docs/decisions.md). CMAKE_ARGS is ignored by the other wheels.
COPY requirements/runtime.txt requirements/runtime-local.txt needle_action/tokens/tiktoken_cache.py /tmp/needle-deps/
# hadolint ignore=DL3008
RUN case ",${NEEDLE_EXTRAS}," in *,local,*) apt-get update \
      && apt-get install -y --no-install-recommends build-essential cmake;; esac \
 && lock=/tmp/needle-deps/runtime.txt \
 && case ",${NEEDLE_EXTRAS}," in *,local,*) lock=/tmp/needle-deps/runtime-local.txt;; esac \
 && CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
    $PIP install --require-hashes --no-deps -r "$lock" \
 && $PIP check \
 && python /tmp/needle-deps/tiktoken_cache.py /opt/needle/tiktoken \
 && TIKTOKEN_CACHE_DIR=/opt/needle/tiktoken python -c \
    "import tiktoken; [tiktoken.get_encoding(e) for e in ('o200k_base', 'cl100k_base')]" \
 && $PIP uninstall -y bpe-openai \
 && case ",${NEEDLE_EXTRAS}," in *,local,*) apt-get purge -y --auto-remove build-essential cmake \
      && dpkg --purge --force-depends perl perl-modules-5.36 libperl5.36 liberror-perl \
      && apt-get clean && rm -rf /var/lib/apt/lists/*;; esac \
 && rm -rf /tmp/needle-deps

# The package itself; its dependencies are already in place. The build backend (setuptools, wheel)
# comes from its own hashed lock into a scratch folder and is gone after the build, so no
# unpinned download happens anywhere in the build.
COPY requirements/build.txt /tmp/needle-src/requirements/
COPY pyproject.toml README.md LICENSE /tmp/needle-src/
COPY needle_action /tmp/needle-src/needle_action
RUN $PIP install --require-hashes --no-deps --target /tmp/needle-build -r /tmp/needle-src/requirements/build.txt \
 && PYTHONPATH=/tmp/needle-build $PIP install --no-deps --no-build-isolation /tmp/needle-src \
 && rm -rf /tmp/needle-src /tmp/needle-build

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
