#!/usr/bin/env bash
# Spool GPU check, the @PART@ part (docs/operations/gpu-check.md): unpacks this bundle into /tmp,
# installs the Vulkan loader it carries where the machine has none, and runs the check: the
# bundled spool serve with the @PART@ endpoint on the GPU and on the CPU, the same jobs on each.
#
#   bash run.sh [--cpu] [--rounds N] [--steps N] [--tokens N]
#
# --cpu: the CPU stands in for the GPU (nothing is installed). The log goes to $OUT (else out/
# beside this file). Settings: SPOOL_GPU_CHECK_DIR (where to unpack; /tmp/spool-gpu-check-@PART@),
# SPOOL_GPU_CHECK_TIMEOUT (seconds the check may run; 450).
set -uo pipefail
export PATH="${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}"
PART=@PART@
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${OUT:-$HERE/out}
DEST=${SPOOL_GPU_CHECK_DIR:-/tmp/spool-gpu-check-$PART}
LIMIT=${SPOOL_GPU_CHECK_TIMEOUT:-450}
CPU=0
for a in "$@"; do [ "$a" = "--cpu" ] && CPU=1; done

mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check-$PART.log") 2>&1
TEE=$!
finish() {
  exec 1>&- 2>&-
  wait "$TEE" 2>/dev/null
  exit "$1"
}
fail() {
  echo "gpu-check $PART: $*"
  finish 1
}

echo "== spool gpu-check $PART: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -m), $(nproc) cores"
rm -rf "$DEST" && mkdir -p "$DEST" || fail "cannot make $DEST"
start=$SECONDS
unpacker=xz
command -v xz >/dev/null && command -v tar >/dev/null || unpacker=python3
for archive in bun native app; do
  file="$HERE/$archive.tar.xz"
  [ -f "$file" ] || fail "$file is missing: carry the whole bundle folder"
  if [ "$unpacker" = xz ]; then
    xz -dc "$file" | tar -x -C "$DEST" || fail "unpacking $file failed"
  else
    # No xz: Python's lzma reads the same archives.
    python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' "$file" "$DEST" || fail "unpacking $file failed (no xz; python3 tried)"
  fi
done
echo "unpacked into $DEST in $((SECONDS - start)) s with $unpacker ($(du -sh "$DEST" | cut -f1))"

debs=("$HERE"/debs/*.deb)
[ -e "${debs[0]}" ] || debs=()
if [ "$CPU" = 1 ]; then
  echo "--cpu: the CPU stands in for the GPU; no Vulkan loader is installed"
  if [ "${#debs[@]}" -gt 0 ] && command -v dpkg >/dev/null; then
    for f in "${debs[@]}"; do dpkg -x "$f" "$DEST/vulkan-loader" || fail "dpkg -x $f failed"; done
    echo "the ${#debs[@]} loader packages unpack (into $DEST/vulkan-loader, not /)"
  fi
else
  if ldconfig -p | grep 'libvulkan\.so\.1' >/dev/null; then
    echo "Vulkan loader: the machine's own"
  else
    [ "${#debs[@]}" -gt 0 ] || fail "this machine has no Vulkan loader (libvulkan.so.1) and the bundle carries none (built with --no-debs)"
    # Into /, the loader's usual place, where Dawn and llama.cpp look for it; then ldconfig.
    for f in "${debs[@]}"; do dpkg -x "$f" / || fail "dpkg -x $f / failed"; done
    ldconfig
    echo "Vulkan loader: installed from ${#debs[@]} carried packages"
  fi
  ldconfig -p | grep 'libvulkan\.so\.1' || fail "libvulkan.so.1 is still not in ldconfig's cache"
  # The NVIDIA driver's ICD may sit in its own folder, where the loader does not look.
  nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && [ -f "$nvidia_icd" ] && ! ls /etc/vulkan/icd.d/nvidia*.json /usr/share/vulkan/icd.d/nvidia*.json /usr/local/share/vulkan/icd.d/nvidia*.json >/dev/null 2>&1; then
    export VK_DRIVER_FILES=$nvidia_icd
  fi
  echo "Vulkan ICDs: ${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-$(ls /etc/vulkan/icd.d/*.json /usr/share/vulkan/icd.d/*.json /usr/local/share/vulkan/icd.d/*.json 2>/dev/null | tr '\n' ' ')}}"
  if command -v nvidia-smi >/dev/null; then nvidia-smi -L 2>&1; else echo "nvidia-smi: none on PATH"; fi
fi

# The worker extracts its native libraries here (a worker's environment passes SPOOL_CACHE_DIR on).
export SPOOL_CACHE_DIR="$DEST/cache"
export HOME="${HOME:-$DEST/home}"
timeout --kill-after=10 "$LIMIT" "$DEST/bun" "$DEST/check.js" --part "$PART" --out "$OUT" "$@"
rc=$?
[ "$rc" = 124 ] && echo "gpu-check $PART: stopped after SPOOL_GPU_CHECK_TIMEOUT=$LIMIT s"
echo "== gpu-check $PART: exit $rc after $SECONDS s; logs: $(ls "$OUT" | tr '\n' ' ')"
finish "$rc"
