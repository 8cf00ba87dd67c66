
	/host:CPU
python
Fé/device:TPU:0 SparseCore 1*dropped_traces2ÿÿÿÿÿÿÿÿÿ
>ù/device:TPU:1 SparseCore 1*dropped_traces2€"
synth-host