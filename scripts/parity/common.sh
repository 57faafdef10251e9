# Sourced by scripts/parity.sh and scripts/parity_ddp.sh: the spec of each parity model, a field of a RESULT
# line (`name=value`), and the median of numbers printed with 4 decimals.
spec_of() { case "$1" in resnet18-cifar) echo specs/parity/resnet18_cifar.toml ;; transformer) echo specs/parity/transformer_lm.toml ;;
  smoke-gpt) echo specs/llm/smoke_gpt.toml ;; smoke-moe) echo specs/llm/smoke_moe.toml ;;
  mlp-comm) echo specs/parity/mlp_comm.toml ;;
  *) echo "unknown model $1 (resnet18-cifar, transformer, smoke-gpt, smoke-moe, mlp-comm)" >&2; exit 2 ;; esac; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.4f", m}'; }
