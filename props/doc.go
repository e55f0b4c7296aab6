// Package props holds the model-based property tests and fuzz targets of the
// SwarmOps store. Everything lives in its test files; this file only
// documents them.
//
// The properties hold the store's moving parts against plain models:
//
//   - The journal and its projections (refs, changesets, index lookups,
//     first-parent walks) against the list of acknowledged transactions, with
//     checkpoints, clean reopens and crash clones of the power-loss memory
//     filesystem (strict and torn) as actions. After a crash the model is the
//     model before it: calls are synchronous, so nothing is in flight.
//   - Ref compare-and-swap against a register per ref, sequentially and across
//     concurrent store handles, the concurrent histories checked for
//     linearizability with porcupine.
//   - Undo against a map of refs and the list of moves (the operation log):
//     moves by several agents on two handles, undos of random moves, and
//     undos refused after another agent's move.
//   - Codecs: round trips, every single-bit flip detected, every truncation a
//     torn tail or an error and never a wrong value.
//
// Fuzz targets (go test -fuzz) cover the decoders and recovery over arbitrary
// and damaged journal segments; their corpora live in testdata/fuzz.
//
// Sizes: each property has a default number of rapid checks chosen so that
// the whole package finishes in a few minutes on 2 cores. The environment
// variable SWARMOPS_PROPS_SCALE (a positive integer, default 1) multiplies
// them for nightly runs; a malformed value fails every test that reads it,
// naming the variable. An explicit -rapid.checks flag wins over both.
//
// Failures print the rapid seed and the -rapid.failfile that replays them,
// as in
//
//	go test ./props -run=TestStoreMatchesModelOfAcknowledgedTransactions -rapid.failfile=testdata/rapid/...
//
// Fail files are kept under testdata/rapid as regressions and replayed
// first on every run. Fuzz targets run with
//
//	go test ./props -run='^$' -fuzz='^FuzzRecoverDamagedSegment$' -fuzztime=5m
//
// and a finding is written under testdata/fuzz, from where plain go test
// replays it.
//
// Tests named TestCanary… run a property against a deliberately broken
// variant (a store weakening such as SkipDatasync, a broken decoder, a
// CAS that ignores its expectation, a mutated model) and fail unless the
// property catches it; with -v they log rapid's shrunk counterexample.
package props
