# Filesystem errors on paths the user named are user errors (exit 2) naming the path and the
# cause: names too long, and, as a user without root's bypass of permissions, directories that
# cannot be written or read, shards that cannot be read ("Permission denied", never "does not
# exist" or "damaged"). The permission
# cases run as `nobody` when this script runs as root, as the current user otherwise.
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
"$USTRAIN" train tiny.toml --set train.steps=2 >train.log 2>&1 || fail "training"

fault "run.name of 300 characters" 2 "run.name = .*at most 255 bytes" -- \
  "$USTRAIN" train tiny.toml --set run.name="$(printf 'n%.0s' $(seq 300))"
long=$(printf 'd%.0s' $(seq 300))
fault "generate --run with a 300-character directory name" 2 "File name too long" -- \
  "$USTRAIN" generate --run "runs/$long/x"
fault "train --resume with a 300-character path" 2 "File name too long" -- \
  "$USTRAIN" train tiny.toml --set run.name=long --resume "runs/$long"

# As an unprivileged user.
as_user=()
if [[ $(id -u) -eq 0 ]]; then
  if id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
    as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
  else
    skip "permission errors" "running as root without a 'nobody' user or setpriv to drop privileges"
    finish
  fi
fi
shared=$WORK/shared
mkdir -p "$shared" && cp -r data tiny.toml "$shared"/ && chmod -R a+rwX "$shared" && chmod a+x "$WORK"
cd "$shared" || exit 1
user() { "${as_user[@]}" env HOME="$shared" "$@"; }
# A build out of the user's reach (a checkout under /root, mode 700) is run from a copy: the
# binary finds its libraries by absolute paths, none in the build tree.
if ! user "$USTRAIN" --version >/dev/null 2>&1; then
  cp "$USTRAIN" "$shared/ustrain" && chmod a+rx "$shared/ustrain" && USTRAIN=$shared/ustrain
fi

mkdir -p locked && chmod 555 locked
fault "output directory without write permission" 2 "cannot create run directory locked/tiny: Permission denied" -- \
  user "$USTRAIN" train tiny.toml --set run.output_dir=locked
cp -r data hidden && chmod 700 hidden && chown -R root hidden 2>/dev/null
[[ $(id -u) -eq 0 ]] || chmod 000 hidden
fault "data.path without read permission" 2 "hidden/manifest.json cannot be accessed \(Permission denied\)" -- \
  user "$USTRAIN" train tiny.toml --set data.path=hidden --set run.name=hidden
mkdir -p closed && cp -r data closed/data && chmod 700 closed && chown root closed 2>/dev/null
[[ $(id -u) -eq 0 ]] || chmod 000 closed
fault "data.path below a directory without permission" 2 "closed/data cannot be accessed \(Permission denied\)" -- \
  user "$USTRAIN" train tiny.toml --set data.path=closed/data --set run.name=closed
# A shard this user may not read: named by --dry-run, and as a permission error (not as a
# damaged file) with data.verify = sizes.
cp -r data unreadable && chown root unreadable/train-*.h5 2>/dev/null && chmod 600 unreadable/train-*.h5
[[ $(id -u) -eq 0 ]] || chmod 000 unreadable/train-*.h5
fault "--dry-run with an unreadable shard" 2 "unreadable/train-[0-9]+\.h5 listed in manifest.json cannot be opened for reading \(Permission denied\)" -- \
  user "$USTRAIN" train tiny.toml --set data.path=unreadable --set run.name=unreadable --dry-run
fault "data.verify = sizes with an unreadable shard" 2 "cannot be opened for reading \(Permission denied\): give this user read permission" -- \
  user "$USTRAIN" train tiny.toml --set data.path=unreadable --set run.name=unreadable --set data.verify=sizes
user "$USTRAIN" train tiny.toml --set run.name=mine --set train.steps=2 >mine.log 2>&1 || fail "training as the user"
chmod 555 runs/mine/checkpoints
fault "checkpoint directory without write permission: refused at start" 2 \
  "cannot write into the checkpoint directory runs/mine/checkpoints: Permission denied" -- \
  user "$USTRAIN" train tiny.toml --set run.name=mine --set train.steps=4 --resume auto
chmod 755 runs/mine/checkpoints
chmod 000 tiny.toml 2>/dev/null; [[ $(id -u) -eq 0 ]] && chown root tiny.toml && chmod 600 tiny.toml
fault "unreadable recipe" 2 "tiny.toml: cannot open the recipe file \(Permission denied\)" -- \
  user "$USTRAIN" train tiny.toml
cd "$WORK" && chmod -R u+rwX "$shared"
finish
