
È/device:GPU:0:Stream #13(Kernel)"	€Ïúæ8ÿÿÿÿÿÿÿÿ"
àþ¸Œ:ÈÞßÝ"~
z
vsm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas*
clock_rate*
core_count*memory_bandwidth*compute_cap_major2 àìx2 „2	€¸½Ü¿a2 	"
gpu-host-0