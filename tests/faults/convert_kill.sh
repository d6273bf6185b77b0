# kill -9 during `data convert` leaves OUT.incomplete-HOST-PID behind; the next conversion into
# the same output removes it (its process is gone) and says so, and produces a complete dataset.
source "$(dirname "$0")/lib/faults.bash"

make_corpus
for i in $(seq 40); do cat corpus/a.txt; done >corpus/b.txt
"$USTRAIN" data convert --input corpus --output out --workers 1 >killed.log 2>&1 &
job=$!
for _ in $(seq 200); do compgen -G "out.incomplete-*" >/dev/null && break; sleep 0.02; done
kill -KILL "$job" 2>/dev/null
wait "$job" 2>/dev/null
if compgen -G "out.incomplete-*" >/dev/null; then
  fault "convert after a conversion killed with kill -9" 0 "removed .*out.incomplete-.*" -- \
    "$USTRAIN" data convert --input corpus --output out
  ! compgen -G "out.incomplete-*" >/dev/null && [[ -f out/manifest.json ]]
  check "  ... no staging directory is left and the dataset is complete" - $?
else
  skip "convert after kill -9" "the conversion finished before it could be killed"
fi
finish
