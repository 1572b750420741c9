package pki

// LeafUsableAt is LeafUsableUntil at a chosen time: at or after a CA's end, which a test
// cannot wait for.
var LeafUsableAt = leafUsableAt
