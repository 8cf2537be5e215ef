#!/usr/bin/env bash
# What the GPU machine lacks for gpu_check.py's PPO arm, made here and carried there.
#
# The device machine (Ubuntu 24.04, Python 3.12, no network, no mmdebstrap) has overlayfs, a
# writable cgroup v2 tree, loop devices, mkfs.ext4 and cc, but no bwrap, pydantic, duckdb or
# megatron-core, and no base image for the task families. This script fills, in the checkout:
#   .whl/     cp312 wheels: pydantic (+ core, annotated-types, typing-inspection), tomli-w,
#             megatron-core 0.16.1, duckdb (the venv's version)        ~30 MB
#   .gpuppo/  bubblewrap's Debian package and an essential-variant bookworm root (bash,
#             coreutils: what the generated families need), mapped to t1-forge/base:bookworm by
#             benchmarks/gpu_slim_base.toml, as a tar.xz of the ids-shifted tree  ~18 MB
# Both paths are git-ignored; name them in the device tool's `carry`. Then run the command
# this script prints (under 2,000 characters). Run as root (mmdebstrap, shifted ids).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
plat=(--only-binary=:all: --python-version 3.12 --implementation cp
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
duckdb=$($PY -c 'import duckdb; print(duckdb.__version__)')
mkdir -p .whl .gpuppo
for p in pydantic==2.12.5 pydantic-core==2.41.5 annotated-types==0.7.0 typing-inspection==0.4.2 \
  tomli-w==1.2.0 megatron-core==0.16.1 "duckdb==$duckdb"; do
  python3 -m pip download -q --no-deps "${plat[@]}" -d .whl "$p"
done
(cd .gpuppo && apt-get download -q bubblewrap)
state=$(mktemp -d)
root=$(T1_SANDBOX_STATE=$state T1_BASE_IMAGES=$PWD/benchmarks/gpu_slim_base.toml $PY -c '
from sandbox.bases import ensure_base, lookup
print(ensure_base(lookup("t1-forge/base:bookworm")))')
(cd "$root" && rm -rf usr/share/doc/* usr/share/man/* usr/share/locale/* usr/share/info/* \
  usr/share/i18n/charmaps/*)
tar -C "$root" --numeric-owner -cf - . | xz -T0 -6 > .gpuppo/slim.tar.xz
name=$(basename "$root")
rm -rf "$state"
du -sh .whl .gpuppo
cat <<CMD
carry: [".whl", ".gpuppo"]
command:
set -o pipefail; dpkg -x .gpuppo/bubblewrap_*.deb /tmp/bw && export PATH=/tmp/bw/usr/bin:\$PATH && B=/tmp/t1-sandbox/bases/$name && mkdir -p \$B && tar --numeric-owner -xpJf .gpuppo/slim.tar.xz -C \$B && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 T1_FORGE_CACHE=/tmp/t1cache T1_SANDBOX_STATE=/tmp/t1-sandbox T1_BASE_IMAGES=\$PWD/benchmarks/gpu_slim_base.toml && python3 benchmarks/gpu_check.py --sections env ppo --budget 420 --ppo-seconds 390 2>&1 | tee \$OUT/gpu_check_ppo.log
CMD
