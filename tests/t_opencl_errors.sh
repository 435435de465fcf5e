#!/usr/bin/env bash
# t_opencl_errors.sh - OpenCL failures are clean one-line errors, not crashes:
# no platform (the ICD loader pointed at an empty vendor dir), a platform or
# device index that does not exist, a user PoCL cannot keep its kernel cache
# for, and a kernel source that does not build.
# fast
source "$(dirname "$0")/lib.sh"
need_models
[ -x "$INFER" ] || fail "no $INFER (build first)"
m=$MODELS/stories260K.bin

mkdir -p "$TMP/no-vendors"
expect_fail "no platform" "no OpenCL platform found" \
	env OCL_ICD_VENDORS="$TMP/no-vendors" OCL_ICD_FILENAMES= "$INFER" "$m" --ids -n 8 -b opencl

need_opencl
expect_fail "platform index" "OpenCL platform 7 does not exist" \
	"$INFER" "$m" --ids -n 8 -b opencl --cl-platform 7
expect_fail "device index" "OpenCL device 9 does not exist" \
	"$INFER" "$m" --ids -n 8 -b opencl --cl-device 9

# a user whose HOME cannot be written: PoCL cannot keep its kernel cache,
# offers no device, and the error says why (not just "no device")
need_cmd setpriv util-linux
ro=$(mktemp -d /tmp/spantrace-ro.XXXXXX)
chmod 755 "$ro" && cp "$m" "$ro/"
expect_fail "an unwritable PoCL cache" "PoCL cannot write its kernel cache" \
	setpriv --reuid=65534 --regid=65534 --clear-groups env -u POCL_CACHE_DIR -u XDG_CACHE_HOME HOME=/nonexistent \
	"$INFER" "$ro/stories260K.bin" --ids -n 8 -b opencl
rm -rf "$ro"

# a bad kernel source: the build error carries the compiler's log
t=$BUILD/tests/test_cl_build
[ -x "$t" ] || fail "no $t (build the unit tests first)"
"$t" >"$TMP/build.out" 2>&1 || fail "test_cl_build: $(tail -n 3 "$TMP/build.out")"
ok "$(tail -n 1 "$TMP/build.out")"
