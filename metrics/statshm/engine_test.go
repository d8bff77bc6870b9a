package statshm

// The engine's variables (and the progress engine's, the rings' and the
// NIC's, which it links) are registered in the test binary, so that
// BenchmarkPublish and BenchmarkRead measure a job's number of variables.
import _ "github.com/tachyon-hpc/tachyon/engine"
