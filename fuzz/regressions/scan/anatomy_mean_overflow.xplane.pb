
,f/device:TPU:2Steps"ÂÇ¿ˆÄÀö‰
0g/device:TPU:3Steps"Û¡ë·ÿÿÿÿÿÿÿÿ"
synth-host