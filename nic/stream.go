package nic

// StreamBuffers is the most buffers one Stream.Write takes: a header and
// the data of each of 16 messages.
const StreamBuffers = 32
