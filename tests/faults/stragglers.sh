# A slow rank (USTRAIN_INJECT_FAULT=slow:rank=R:ms=M) is named as a straggler: a warning on the
# leading rank, straggler_rank and straggler_lag_ms in metrics.jsonl; the run still finishes.
# Healthy ranks are never named.
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
common=(--set train.eval_interval=0 --set log.interval=2 --set train.steps=8 --set checkpoint.interval=0)
# field RUN NAME: the values of a metrics field over the train rows that have it.
field() {
  "$PYTHON" -c "
import json, sys
print(' '.join(str(r[sys.argv[2]]) for r in map(json.loads, open(sys.argv[1])) if sys.argv[2] in r))" \
    "runs/$1/metrics.jsonl" "$2"
}

fault "dp4: rank 3 sleeps 150 ms a step" 0 "rank 3 is a straggler: it computed [0-9.]+ ms a step longer" -- \
  env USTRAIN_INJECT_FAULT="slow:rank=3:ms=150" timeout 300 mpiexec --oversubscribe --allow-run-as-root -n 4 \
  "$USTRAIN" train tiny.toml "${common[@]}" --set parallel.dp=4 --set train.micro_batch=2 --set run.name=slow
ranks=$(field slow straggler_rank)
lags=$(field slow straggler_lag_ms)
[[ -n $ranks && $ranks =~ ^(3(\.0)?\ ?)+$ ]] && "$PYTHON" -c "import sys; assert all(100 < float(x) < 400 for x in sys.argv[1:])" $lags
check "metrics name rank 3 (${ranks:-none}) with a lag near 150 ms (${lags:-none})" 0 $?

fault "dp2 x pp2: the last stage sleeps 150 ms a step" 0 "rank 3 is a straggler" -- \
  env USTRAIN_INJECT_FAULT="slow:rank=3:ms=150" timeout 300 mpiexec --oversubscribe --allow-run-as-root -n 4 \
  "$USTRAIN" train tiny.toml "${common[@]}" --set parallel.dp=2 --set parallel.pp=2 --set run.name=slow-pp

# A slow stage is not a dead one: the last of two pipeline stages computes 2.5 s a step, past a
# 1 s deadline; the first stage's receives ask it, it answers, and the run finishes.
fault "pp2: the last stage computes past the deadline" 0 "done" -- \
  env USTRAIN_INJECT_FAULT="slow:rank=1:ms=2500" timeout 300 mpiexec --oversubscribe --allow-run-as-root -n 2 \
  "$USTRAIN" train tiny.toml "${common[@]}" --set train.steps=3 --set parallel.pp=2 \
  --set parallel.comm_timeout_s=1 --set run.name=slow-stage

timeout 300 mpiexec --oversubscribe --allow-run-as-root -n 2 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set parallel.dp=2 --set run.name=healthy >healthy.log 2>&1
[[ $? == 0 && -z $(field healthy straggler_rank) ]] && ! grep -q straggler healthy.log
check "healthy ranks: no straggler named" 0 $? healthy.log
finish
