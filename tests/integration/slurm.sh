#!/bin/sh
# slurm.sh — deploy/slurm/train.sbatch for real, on a one-node Slurm cluster
# this test starts and stops itself: its own munge key and munged socket,
# its own slurm.conf, state and logs, all under its temporary directory, on
# its own ports; slurmctld, slurmd and munged run in the foreground as its
# children and are stopped at exit, so nothing of the machine changes. The
# job: 4 tasks on one node, 2 parameter servers + 2 workers from the Slurm
# resolver (the four on one node, on base port + local index), one epoch of
# the MLP; the chief's final accuracy, both stores and the shutdown are
# checked. Needs root and Debian's slurmctld, slurmd and munge.
. "$(dirname "$0")/lib.inc"
[ "$(id -u)" = 0 ] || { echo "skipped: needs root to run slurmd"; exit 77; }
for p in slurmctld slurmd munged sbatch scontrol scancel; do
    command -v $p >/dev/null 2>&1 ||
        { echo "skipped: no $p (Debian: slurmctld slurmd slurm-client munge)"; exit 77; }
done
NODE=$(hostname -s)
# The tasks' addresses are NODE:port; the test stays on loopback.
case "$(getent hosts "$NODE" | awk '{print $1; exit}')" in
    127.*|::1) ;;
    *) echo "skipped: this machine's name $NODE does not resolve to a loopback address (the tasks listen on NODE:port)"; exit 77 ;;
esac
need_data
pick_ports
S=$T/slurm
mkdir -m 700 "$S" "$S/munge" "$S/state" "$S/spool"
export SLURM_CONF="$S/slurm.conf"
# No slurm variables of an outer job may leak into ours.
for v in $(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p'); do [ "$v" = SLURM_CONF ] || unset "$v"; done

stop_job() {
    [ -n "${JOB:-}" ] && scancel "$JOB" 2>/dev/null
    cleanup
}
trap stop_job EXIT INT TERM

dd if=/dev/urandom of="$S/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$S/munge.key"
munged -F -f --key-file="$S/munge.key" --socket="$S/munge/sock" \
    --pid-file="$S/munge/pid" --log-file="$S/munged.log" \
    --seed-file="$S/munge/seed" > "$S/munged.out" 2>&1 &
track $!
cat > "$SLURM_CONF" <<EOF
ClusterName=hetpstest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge/sock
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=hetps Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=YES
EOF
wait_for 5 test -S "$S/munge/sock" || { cat "$S/munged.log"; fail "munged did not start"; }
slurmctld -D -i -f "$SLURM_CONF" > "$S/slurmctld.out" 2>&1 &
track $!
slurmd -D -f "$SLURM_CONF" -N "$NODE" > "$S/slurmd.out" 2>&1 &
track $!
node_idle() { scontrol show node "$NODE" 2>/dev/null | grep -q "State=IDLE"; }
wait_for 30 node_idle || { tail "$S/slurmctld.log" "$S/slurmd.log"; fail "the Slurm node did not come up"; }
ok "one-node Slurm cluster up (slurmctld port $PORT, slurmd $((PORT + 1)))"

t0=$(date +%s)
# The job makes its own certificates (train.sbatch: hetps certs slurm), for
# the node names Slurm gives it, not lib.inc's loopback set.
unset HETPS_CERTS
HETPS_BIN="$PWD/$BIN" HETPS_MODEL="$PWD/deploy/models/fashion_mlp.json" \
HETPS_PS_TASKS=2 HETPS_BASE_PORT=$((PORT + 2)) HETPS_STORE="$T/store" \
    sbatch --parsable --time=5 --nodes=1 --ntasks=4 --ntasks-per-node=4 \
        --output="$T/job.out" deploy/slurm/train.sbatch --epochs 1 > "$T/jobid" 2> "$T/sbatch.err" ||
    { cat "$T/sbatch.err"; fail "sbatch refused the job"; }
JOB=$(cat "$T/jobid")
job_done() { ! squeue -h -j "$JOB" 2>/dev/null | grep -q .; }
wait_for 240 job_done || { cat "$T/job.out"; fail "job $JOB did not end in 240 s"; }
JOB=""
t1=$(date +%s)
grep -E "serving|Final weights|shut down" "$T/job.out"
grep -q "told to shut down" "$T/job.out" || { tail -30 "$T/job.out"; fail "the chief did not shut the servers down"; }
acc=$(sed -n 's/.*Final weights (all workers done).*val_accuracy: \([0-9.]*\).*/\1/p' "$T/job.out")
[ -n "$acc" ] || { tail -30 "$T/job.out"; fail "the chief printed no final val_accuracy"; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "one epoch of the MLP reached $acc < 0.80"
for j in 0 1; do
    [ -f "$T/store/ps-$j/data.mdb" ] || fail "no store for ps:$j at $T/store/ps-$j"
done
# the four tasks share the node: ports base + local index
grep -q "ps:1 INFO serving shard 1 of 2 on tcp://$NODE:$((PORT + 3)) " "$T/job.out" ||
    { grep serving "$T/job.out"; fail "ps:1 is not on $NODE:$((PORT + 3)) (base + local index 1)"; }
ok "sbatch train.sbatch: 2 ps + 2 workers, val_accuracy $acc, $((t1 - t0)) s"

# A job that cannot be laid out stops before any task, naming the variable.
HETPS_BIN="$PWD/$BIN" HETPS_PS_TASKS=4 HETPS_STORE="$T/store2" \
    sbatch --parsable --time=5 --nodes=1 --ntasks=4 --ntasks-per-node=4 --output="$T/bad.out" \
        deploy/slurm/train.sbatch > "$T/jobid" 2> "$T/sbatch.err" ||
    { cat "$T/sbatch.err"; fail "sbatch refused the second job"; }
JOB=$(cat "$T/jobid")
wait_for 60 job_done || { cat "$T/bad.out"; fail "job $JOB did not end in 60 s"; }
JOB=""
grep -q "Slurm: HETPS_PS_TASKS: 4 parameter server(s) leave no worker among the job's 4 task(s)" "$T/bad.out" ||
    { cat "$T/bad.out"; fail "no message naming HETPS_PS_TASKS"; }
[ ! -e "$T/store2" ] || fail "a task started despite the bad layout"
ok "a bad layout stops the job before any task, naming HETPS_PS_TASKS"
