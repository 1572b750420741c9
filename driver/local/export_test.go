package local

// SetLogRate sets how many bytes a second the servers started from now on may have
// clouddb read of their log output, and returns the rate it replaces.
func SetLogRate(bytesPerSecond int64) int64 { return logRate.Swap(bytesPerSecond) }
