
¸/device:GPU:0*Stream #13(Kernel)"	€Ïúæ8ÿÿÿÿÿÿÿÿ*
clock_rate*
core_count*memory_bandwidth*compute_cap_major2 àìx2 „2	€¸½Ü¿a2 	"
gpu-host-0