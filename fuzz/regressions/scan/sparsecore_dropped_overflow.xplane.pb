
-e/device:TPU:1XLA Ops"Òû¸¦¢§Î
>ø/device:TPU:1 SparseCore 0*dropped_traces2€
Fù/device:TPU:1 SparseCore 1*dropped_traces2ÿÿÿÿÿÿÿÿÿ"
synth-host