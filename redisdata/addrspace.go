package redisdata

// AddressSpaceFor is the address space CapAddressSpace allows a server loading the data
// of a database of maxMemory bytes: twice that, and addressSpareBytes for the server
// itself (its code, libraries, threads' stacks: about 60 MB) and its allocator.
func AddressSpaceFor(maxMemory int64) uint64 { return uint64(2*maxMemory + addressSpareBytes) }

const addressSpareBytes = 256 << 20
