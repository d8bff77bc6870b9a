module github.com/tachyon-hpc/tachyon

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.2 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
