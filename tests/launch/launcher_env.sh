#!/usr/bin/env bash
# The perf binaries join ranks started by a launcher, reading its environment
# (bench/common/launch.cc) without linking MPI. Each case starts 3 ranks of
# all_reduce_perf by hand with the variables that launcher exports (Open MPI's
# mpirun, SLURM's srun, torchrun) and checks that they form one 3-rank
# communicator, name the launcher, and report 0 wrong elements.
#
#   tests/launch/launcher_env.sh BUILD_DIR
set -uo pipefail

BIN=${1:?build dir}/bench/all_reduce_perf
NRANKS=3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gyre-launch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export NCCL_SOCKET_IFNAME=lo GYRE_INIT_TIMEOUT=20 GYRE_TIMEOUT=20
unset NCCL_COMM_ID OMPI_COMM_WORLD_RANK RANK WORLD_SIZE SLURM_PROCID MASTER_ADDR MASTER_PORT

# rank_env LAUNCHER RANK: the variables that launcher gives rank RANK.
rank_env() {
  local r=$2
  case $1 in
    openmpi) echo "OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$NRANKS OMPI_COMM_WORLD_LOCAL_RANK=$r" \
                  "OMPI_COMM_WORLD_LOCAL_SIZE=$NRANKS OMPI_MCA_ess_base_jobid=$JOB" ;;
    slurm) echo "SLURM_PROCID=$r SLURM_NTASKS=$NRANKS SLURM_LOCALID=$r SLURM_STEP_NUM_NODES=1" \
                "SLURM_JOB_ID=$JOB SLURM_STEPID=0" ;;
    torchrun) echo "RANK=$r WORLD_SIZE=$NRANKS LOCAL_RANK=$r LOCAL_WORLD_SIZE=$NRANKS MASTER_ADDR=127.0.0.1" \
                   "MASTER_PORT=$PORT" ;;
  esac
}

failed=0
for launcher in openmpi slurm torchrun; do
  JOB=$((RANDOM * 32768 + RANDOM))
  # A port the kernel just handed out and released: a random one in the
  # ephemeral range collided with a busy connection ("Address already in use").
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  pids=()
  for ((r = 0; r < NRANKS; r++)); do
    # shellcheck disable=SC2046  # rank_env is a list of VAR=value words
    env $(rank_env $launcher $r) timeout 60 "$BIN" -b 8 -e 64K -f 8 -c 1 -n 2 -w 1 >"$WORK/$launcher.$r" 2>&1 &
    pids+=($!)
  done
  rcs=()
  for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
  out=$WORK/$launcher.0
  if [[ ${rcs[*]} != "0 0 0" ]] || ! grep -q "nRanks $NRANKS launcher $launcher " "$out" ||
     ! grep -q "^# Wrong elements *: 0 OK" "$out"; then
    echo "FAIL $launcher: exit codes ${rcs[*]}"
    cat "$WORK/$launcher".* | sed 's/^/    /' | head -40
    failed=1
  else
    echo "ok   $launcher: $NRANKS ranks joined from the launcher's environment, 0 wrong"
  fi
done
exit $failed
