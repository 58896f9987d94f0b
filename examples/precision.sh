# Sourced by the recipes. mixed_precision_flag prints the fairseq-train flag for mixed precision
# on this machine's GPU: --bf16 where it computes in bf16 natively (Ampere and later: A100, H100,
# H200, RTX 30xx/40xx; with the plugin --bf16 is fp32 weights + bf16 autocast, no loss scaler),
# --fp16 otherwise (V100, T4: fairseq's fp16 with its dynamic loss scaler). torch's
# is_bf16_supported() also answers yes for GPUs that only emulate bf16 (slower than fp16 there),
# so emulation is not counted. Without a CUDA GPU it prints nothing: training on the CPU is fp32.
mixed_precision_flag() {
  python - <<'PY' 2>/dev/null
import torch
if torch.cuda.is_available():
    try:
        ok = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch before 2.3 has no emulation to exclude
        ok = torch.cuda.is_bf16_supported()
    print("--bf16" if ok else "--fp16")
PY
}
