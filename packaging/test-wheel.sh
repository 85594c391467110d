#!/usr/bin/env bash
# Tests the wheel in dist/ where nothing else is installed: a clean Debian root (debootstrap,
# minbase + python3 + python3-venv; cached under $BUILD), a fresh venv there, the wheel installed
# with `pip install --only-binary :all:` (nothing can be compiled; numpy comes from PyPI as a wheel),
# then, inside the root: `ldd` of the installed extension (only the base system), the smoke test
# (tests/wheel/smoke.py: README quick start, a transformer converted / saved / loaded / run, the CLI,
# a .pt2 and an .onnx import against torch's and onnxruntime's outputs), and the part of the pytest
# suite that needs neither torch nor onnx, run against the installed wheel (no source tree there).
# On the host it then runs the coexistence test (tests/wheel/test_coexistence.py) in a venv that has
# the wheel and the system's torch, onnx and onnxruntime.
#
#   packaging/test-wheel.sh [PYTHON] [ARCH]     ARCH: amd64 (default) or arm64 (through qemu-user)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
arch=${2:-$(dpkg --print-architecture)}
build=$(realpath -m "${BUILD:-build}")
case "$arch" in
  amd64) mach=x86_64 ;;
  arm64) mach=aarch64 ;;
  *) echo "unsupported ARCH $arch" >&2; exit 2 ;;
esac
wheel=$(ls dist/milkit-*-manylinux*_"$mach".whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "no $mach wheel in dist/ (make wheel first)" >&2; exit 1; }
root="$build/debroot-$arch"
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# ---- a foreign architecture runs through qemu-user (binfmt_misc; idempotent) ---------------------
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  if ! command -v "qemu-$mach-static" >/dev/null || ! command -v update-binfmts >/dev/null; then
    echo "running $arch code needs qemu-user-static and binfmt-support (make deps-aarch64)" >&2; exit 1
  fi
  mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  grep -qx enabled "/proc/sys/fs/binfmt_misc/qemu-$mach" 2>/dev/null || update-binfmts --enable "qemu-$mach"
  # F (fix binary): the kernel opened qemu when it was registered, so it runs the root's programs
  # in the chroot, which has no qemu of its own
  grep -q '^flags: .*F' "/proc/sys/fs/binfmt_misc/qemu-$mach" \
    || { echo "qemu-$mach is registered without binfmt_misc's F flag" >&2; exit 1; }
fi

# ---- the clean root (cached; rebuilt when its stamp is missing) ----------------------------------
if [ ! -f "$root/.milkit-root" ]; then
  rm -rf "$root" "$root.tmp"
  echo "debootstrap $suite ($arch) into $root"
  t0=$(now)
  # (for a foreign ARCH, debootstrap runs the second stage in the new root through qemu itself)
  debootstrap --arch="$arch" --variant=minbase --include=python3,python3-venv "$suite" "$root.tmp" \
    http://deb.debian.org/debian >"$build/debootstrap-$arch.log" 2>&1 \
    || { tail -20 "$build/debootstrap-$arch.log" >&2; exit 1; }
  touch "$root.tmp/.milkit-root" && mv "$root.tmp" "$root"
  echo "debootstrap: $(secs "$t0" "$(now)") s"
fi

# ---- stage the wheel, the fixtures and the tests (no python/ source tree goes in) ---------------
stage="$root/opt/milkit-test"
rm -rf "$stage" && mkdir -p "$stage/fixtures" "$stage/src"
cp "$wheel" "$stage/"
"$py" tests/wheel/make_fixtures.py "$stage/fixtures" >/dev/null
cp tests/wheel/smoke.py README.md "$stage/"
# the tests that import neither torch nor onnx (directly or through a helper), in their folders, with
# the folders' __init__.py and the helpers (tests/python/support)
mkdir -p "$stage/src/tests/python"
selected=()
# (tools/test_display.py is left out: it needs Graphviz's dot and Chromium, system programs the root lacks)
for f in $(find tests/python -name 'test_*.py' -not -path 'tests/python/support/*' | sort); do
  [ "$f" = tests/python/tools/test_display.py ] && continue
  if ! grep -qE '^\s*(import|from) (torch|torchvision|transformers|onnx|onnxruntime)\b|^from support\.(torch_util|onnx_util|onnx_suite)\b|importorskip\("(torch|onnx)' "$f"; then
    selected+=("$f")
  fi
done
(cd tests/python && cp --parents conftest.py $(find . -name __init__.py -not -path './support/*') support/*.py "${selected[@]#tests/python/}" \
   "$stage/src/tests/python/")
cp -r docs examples "$stage/src/"
cp README.md pyproject.toml "$stage/src/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# pip in the root trusts what the host's pip trusts (a proxy's CA, where the network has one)
host_ca=$("$py" -m pip config get global.cert 2>/dev/null || true)
[ -f "$host_ca" ] || host_ca=/etc/ssl/certs/ca-certificates.crt
cp "$host_ca" "$stage/ca.crt"

# ---- run inside the root ---------------------------------------------------------------------------
mounts=()
cleanup() { for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
for d in proc dev sys; do
  mountpoint -q "$root/$d" || { mount --rbind "/$d" "$root/$d" && mounts+=("$root/$d"); }
done
mountpoint -q "$root/dev/shm" || true
tests=$(printf '%s ' "${selected[@]}")
# what the tests need besides the wheel. PyPI has no Linux aarch64 wheel of coremltools (only
# 4.0b3, a py3-none-any beta that would install and then fail), so on arm64 the tests that compare
# with coremltools are skipped (tests/python/conftest.py: MILKIT_TESTS_NO_COREMLTOOLS)
test_pkgs="pytest sympy ml_dtypes pillow"
no_coremltools=1
if [ "$arch" = amd64 ]; then test_pkgs+=" 'coremltools>=8'"; no_coremltools=0; fi
# the guides whose examples import torch or onnx, or draw with Graphviz
for g in importing_onnx importing_pytorch jupyter running_on_linux; do
  tests+=" --deselect tests/python/api/test_docs.py::test_guide_examples_run[$g.md]"
done
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin LANG=C.UTF-8 MILKIT_NUM_THREADS=2 PIP_CERT=/opt/milkit-test/ca.crt \
  MILKIT_TESTS_NO_COREMLTOOLS=$no_coremltools \
  /bin/bash -euo pipefail -c "
cd /opt/milkit-test
echo \"root: \$(. /etc/os-release && echo \$PRETTY_NAME), \$(uname -m), python \$(python3 -c 'import platform; print(platform.python_version())')\"
for c in gcc cc g++ c++ clang; do if command -v \$c >/dev/null; then echo \"the clean root has a compiler: \$c\" >&2; exit 1; fi; done
rm -rf /opt/venv && python3 -m venv /opt/venv
t0=\$(date +%s.%N)
/opt/venv/bin/pip install -q --disable-pip-version-check --only-binary :all: ./$(basename "$wheel")
t1=\$(date +%s.%N)
echo \"pip install of the wheel (numpy and tqdm from PyPI): \$(python3 -c \"print(round(\$t1 - \$t0, 1))\") s\"
ext=\$(ls /opt/venv/lib/python3*/site-packages/milkit/_core*.so)
echo \"ldd \$ext:\"; ldd \"\$ext\"
bad=\$(ldd \"\$ext\" | grep '=>' | grep -vE '^\s*(libc|libm|libstdc\+\+|libgcc_s|libz|libpthread|libdl|librt)\.so' || true)
if [ -n \"\$bad\" ]; then echo \"the extension needs libraries beyond the base system: \$bad\" >&2; exit 1; fi
if ldd \"\$ext\" | grep -q 'not found'; then echo 'unresolved libraries' >&2; exit 1; fi
t0=\$(date +%s.%N)
cd /tmp && /opt/venv/bin/python /opt/milkit-test/smoke.py /opt/milkit-test/fixtures /opt/milkit-test/README.md
t1=\$(date +%s.%N)
echo \"smoke test: \$(python3 -c \"print(round(\$t1 - \$t0, 1))\") s\"
/opt/venv/bin/pip install -q --disable-pip-version-check --only-binary :all: $test_pkgs
cd /opt/milkit-test/src
/opt/venv/bin/python -c 'import milkit, sys; assert \"site-packages\" in milkit.__file__, milkit.__file__'
t0=\$(date +%s.%N)
/opt/venv/bin/python -m pytest -q -p no:cacheprovider $tests
t1=\$(date +%s.%N)
echo \"pytest: \$(python3 -c \"print(round(\$t1 - \$t0, 1))\") s\"
"
echo "clean root ($arch): passed"
cleanup; mounts=()

# ---- beside torch, onnx and onnxruntime (host venv: the wheel + the system's packages) ----------
if [ "$arch" = "$(dpkg --print-architecture)" ]; then
  venv="$build/wheel-venv"
  rm -rf "$venv" && "$py" -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$wheel"
  (cd /tmp && env -u PYTHONPATH "$venv/bin/python" -m pytest -q -s -p no:cacheprovider \
     "$OLDPWD/tests/wheel/test_coexistence.py")
fi
