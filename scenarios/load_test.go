package scenarios

import (
	"errors"
	"strings"
	"testing"
)

// TestShippedScenariosLoad guards the embedded files: a scenario that does not
// load would silently drop a write path from every sweep.
func TestShippedScenariosLoad(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 14 {
		t.Fatalf("got %d scenarios, want at least 14 (one per write path)", len(all))
	}
	for _, s := range all {
		if s.Ops() < 1 || s.Steps[0].Kind != KindInit {
			t.Errorf("%s: %d ops, first step %s", s.Name, s.Ops(), s.Steps[0].Kind)
		}
	}
}

// TestLoaderErrorsNameFileAndLine checks that every kind of malformed input
// is rejected with ErrInvalid and a message carrying file:line:col and what
// is wrong.
func TestLoaderErrorsNameFileAndLine(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unknown top key", "name: x\nclaims: [C1]\nsteps:\n  - init:\ncolour: red\n", "bad.yaml:5:1: scenario: unknown key \"colour\""},
		{"unknown claim", "name: x\nclaims: [C1, C5]\nsteps:\n  - init:\n", "bad.yaml:2:14: unknown claim \"C5\""},
		{"unknown label", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - commit: {parents: [nope], files: {a: b}}\n", "bad.yaml:5:24: parent: unknown label \"nope\""},
		{"unknown step", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - fly: {}\n", "bad.yaml:5:5: unknown step kind \"fly\""},
		{"unknown step key", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - commit: {files: {a: b}, colour: red}\n", "bad.yaml:5:29: commit: unknown key \"colour\""},
		{"malformed yaml", "name: x\nclaims: [C1\nsteps:\n", "bad.yaml:1:1: malformed YAML: did not find expected ',' or ']'"},
		{"missing init", "name: x\nclaims: [C1]\nsteps:\n  - read:\n", "bad.yaml:4:5: read before init"},
		{"bad times", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - repeat: {times: -1, steps: [read: ]}\n", "bad.yaml:5:21: times = -1 is out of range"},
		{"bad outcome", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - commit: {files: {a: b}, outcome: maybe}\n", "outcome \"maybe\" is not one of ok, conflict"},
		{"race same writer", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - race: {at: LOCK, first: {commit: {files: {a: b}}}, second: {commit: {files: {a: c}}}}\n", "two sides must use different writers"},
		{"bad path", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - commit: {files: {../etc: b}}\n", "path \"../etc\" must be relative and clean"},
		{"string size", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - commit: {files: {a: {size: big}}}\n", "size must be an integer"},
		{"empty", "", "empty scenario file"},
		{"checkpoint key", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - checkpoint: {force: true}\n", "bad.yaml:5:18: checkpoint: unknown key \"force\""},
		{"raced checkpoint", "name: x\nclaims: [C1]\nsteps:\n  - init:\n  - race: {at: LOCK, first: {checkpoint: }, second: {commit: {files: {a: b}, writer: 1}}}\n", "only write steps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load("bad.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("loaded; want error containing %q", c.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("got  %q\nwant it to contain %q", err.Error(), c.want)
			}
		})
	}
}

func TestSelectRejectsEmptyMatchAndBadPattern(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Select(all, "nothing-*"); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty match: got %v", err)
	}
	if _, err := Select(all, "[a"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad pattern: got %v", err)
	}
	got, err := Select(all, "land-*")
	if err != nil || len(got) != 5 {
		t.Errorf("land-*: got %d, %v; want 5", len(got), err)
	}
}

func TestGeneratedContentIsDeterministic(t *testing.T) {
	f := File{Size: 1001, Seed: 9, Gen: true}
	a, b := f.Data(), f.Data()
	if string(a) != string(b) || len(a) != 1001 {
		t.Fatal("generated content differs between calls")
	}
}

// TestCheckpointStep: a checkpoint step takes an optional writer and counts
// as an operation.
func TestCheckpointStep(t *testing.T) {
	sc, err := Load("ck.yaml", []byte("name: ck\nclaims: [C1]\nsteps:\n  - init:\n  - checkpoint:\n  - checkpoint: {writer: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Ops() != 3 || sc.Steps[1].Kind != KindCheckpoint || sc.Steps[2].Writer != 1 {
		t.Errorf("steps %+v", sc.Steps)
	}
}

// TestOptionsLoadIntoTheStoreOptions: each store option a scenario sets
// reaches its field, and one out of its range is refused naming it.
func TestOptionsLoadIntoTheStoreOptions(t *testing.T) {
	src := "name: x\nclaims: [C1]\noptions: {checkpoint_every: 3, checkpoint_bytes: 4096, inline_threshold: 64, segment_size: 1024}\nsteps:\n  - init:\n"
	sc, err := Load("opts.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	o := sc.Options
	if o.CheckpointEvery != 3 || o.CheckpointBytes != 4096 || o.InlineThreshold != 64 || o.SegmentSize != 1024 {
		t.Errorf("options = every %d, bytes %d, inline %d, segment %d; want 3, 4096, 64, 1024",
			o.CheckpointEvery, o.CheckpointBytes, o.InlineThreshold, o.SegmentSize)
	}
	_, err = Load("opts.yaml", []byte(strings.Replace(src, "segment_size: 1024", "segment_size: 511", 1)))
	if want := "segment_size = 511 is out of range [512, "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("segment_size 511: got %v, want an error containing %q", err, want)
	}
}
