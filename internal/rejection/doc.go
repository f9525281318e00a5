// Package rejection builds SFT labels with reasoning by multi-beam
// rejection sampling, as the published world model's SFT data was made: for
// every expanded turn sample (package expand) a teacher world model is
// asked for N generations (beams), each is scored against the real
// observation with the hybrid reward (package reward), and a keep [Policy]
// decides which beams become training targets — the teacher's reasoning
// plus its tagged observation — and which best/worst pairs become
// preference data.
//
// [Run] streams its input, keeps a bounded number of teacher requests in
// flight, caches teacher answers on disk by request hash, journals every
// scored beam as it finishes, and writes its outputs in input order with a
// checkpoint after each sample; run again after a crash (kill -9 included)
// it requests no finished beam again and ends with the same bytes an
// uninterrupted run writes.
//
// Its memory does not grow with its input. It holds the window of
// samples between the reader and the writer (about four times the
// samples that keep the requests in flight busy; see windowSize), for
// each sample whose beams are out one rendered prompt and one judge
// record shared by its beams, the teacher requests in flight, and
// writer and journal buffers of at most a few MB (flushBytes). Nothing
// is kept per sample once it is written: the input is counted, not
// indexed, and the summary is per domain with fixed histogram bins. A
// resumed run also holds what the journal has for the samples after its
// checkpoint: those the stopped run had in its window.
package rejection
