// Package contention drives one SwarmOps store with many writers at once and
// checks what they leave behind.
//
// The specs in this package start real writer processes (the helper binary in
// contention/cmd/writer, built with gexec) or real swarmops CLI processes,
// release them together through a file barrier, and then check the store
// before they look at a single timing: every acknowledged changeset present,
// every chain intact, the journal sequence contiguous, no changeset twice,
// Verify(deep) clean, the log from main correct. Only then do they report the
// counters that claim C8 is about (Busy count, lock wait in lock passes,
// spread between the slowest and fastest writer, throughput), and check the
// ref compare-and-swap histories with porcupine for claim C5.
//
// This file's package holds what both sides share: the knobs, the JSON-lines
// record each writer emits, the writer loop itself (so the same workload can
// run as 32 processes or as 32 goroutines), the statistics and the porcupine
// model of a ref.
//
// A lock pass is the mean time the writer lock takes to go from one holder to
// the next in a run: the run's wall time divided by the number of times any
// writer took the lock. Waits are reported in passes rather than in
// milliseconds because the disk under the run changes from host to host and
// from hour to hour, while "this writer waited while 31 others went once" is
// what C8 promises.
package contention
