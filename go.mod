module github.com/tachyon-hpc/tachyon

go 1.26.8

require (
	github.com/klauspost/cpuid/v2 v2.4.2
	golang.org/x/sys v0.49.0
)
