package core_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// consistent is the check run after every spec that leaves a store open: a
// deep verify finds no problem.
func consistent(s *core.Store) {
	GinkgoHelper()
	rep, err := s.Verify(true, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(rep.Problems).To(BeEmpty())
}

// noise is n pseudo-random bytes from seed: incompressible.
func noise(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

var _ = Describe("a store", func() {
	var (
		m *faultfs.MemFS
		s *core.Store
	)
	BeforeEach(func() {
		m = faultfs.NewMem()
		var err error
		s, err = core.Create("/s", core.Options{FS: m, InlineThreshold: 64})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			consistent(s)
			s.Close()
		})
	})
	commit := func(req core.CommitRequest) core.ID {
		GinkgoHelper()
		id, err := s.Commit(req)
		Expect(err).NotTo(HaveOccurred())
		return id
	}

	Describe("Commit", func() {
		It("builds on the first parent's tree and records generation and delta", func() {
			a := commit(core.CommitRequest{Changes: []core.Change{put("x/y", "1")}})
			b := commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("z", "2")}})
			sn, _ := s.Snapshot()
			flat, err := sn.Flatten(b)
			Expect(err).NotTo(HaveOccurred())
			Expect(flat).To(HaveKey("x/y"))
			Expect(flat).To(HaveKey("z"))
			cs, _ := sn.Changeset(b)
			Expect(cs.Generation).To(Equal(uint64(2)))
			Expect(cs.Delta).To(Equal(objects.DeltaHash([]objects.PathChange{{Path: "z", Op: objects.OpAdd, Mode: objects.ModeFile, ID: objects.BlobID([]byte("2"))}})))
		})
		It("makes a merge with two parents and advances the ref from the first (Land's CAS)", func() {
			a := commit(core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
			o := commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("o", "1")}})
			h := commit(core.CommitRequest{Parents: []core.ID{a}, Changes: []core.Change{put("h", "1")}, Advance: "main"})
			mrg := commit(core.CommitRequest{Parents: []core.ID{h, o}, Changes: []core.Change{put("o", "1")}, Advance: "main"})
			_, err := s.Commit(core.CommitRequest{Parents: []core.ID{h, o}, Changes: []core.Change{put("p", "1")}, Advance: "main"})
			var ce *core.ConflictError
			Expect(errors.As(err, &ce)).To(BeTrue())
			Expect(ce.Current).To(Equal(mrg))
		})
		It("rejects a parent that does not exist", func() {
			_, err := s.Commit(core.CommitRequest{Parents: []core.ID{{9}}})
			Expect(err).To(MatchError(core.ErrNotFound))
		})
		It("rejects an advance of a ref that moved", func() {
			a := commit(core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
			b := commit(core.CommitRequest{Parents: []core.ID{a}, Advance: "main"})
			_, err := s.Commit(core.CommitRequest{Parents: []core.ID{a}, Advance: "main"})
			var ce *core.ConflictError
			Expect(errors.As(err, &ce)).To(BeTrue())
			Expect(ce.Current).To(Equal(b))
		})
		It("creates a ref from absence when there are no parents, and refuses if it exists", func() {
			commit(core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "r"})
			_, err := s.Commit(core.CommitRequest{Changes: []core.Change{put("a", "2")}, Advance: "r"})
			Expect(err).To(MatchError(core.ErrConflict))
		})
	})

	Describe("UpdateRefs", func() {
		It("creates, moves and deletes with a reflog of every move", func() {
			a := commit(core.CommitRequest{Changes: []core.Change{put("a", "1")}})
			b := commit(core.CommitRequest{Parents: []core.ID{a}})
			Expect(s.UpdateRefs(core.RefUpdate{Name: "r", New: a})).To(Succeed())
			Expect(s.UpdateRefs(core.RefUpdate{Name: "r", Old: a, New: b})).To(Succeed())
			Expect(s.UpdateRefs(core.RefUpdate{Name: "r", Old: b})).To(Succeed())
			sn, _ := s.Snapshot()
			log, err := sn.RefLog("r")
			Expect(err).NotTo(HaveOccurred())
			Expect(log).To(HaveLen(3))
			Expect(log[2].New.IsZero()).To(BeTrue())
			Expect(sn.Refs()).To(BeEmpty())
		})
		It("refuses a ref to a tree or blob", func() {
			a := commit(core.CommitRequest{Changes: []core.Change{put("a", "1")}})
			sn, _ := s.Snapshot()
			cs, _ := sn.Changeset(a)
			Expect(s.UpdateRefs(core.RefUpdate{Name: "r", New: cs.Root})).To(MatchError(core.ErrNotFound))
		})
	})

	Describe("Snapshot", func() {
		It("keeps its view while later commits land", func() {
			a := commit(core.CommitRequest{Changes: []core.Change{put("a", "1")}, Advance: "main"})
			sn, _ := s.Snapshot()
			commit(core.CommitRequest{Parents: []core.ID{a}, Advance: "main"})
			Expect(sn.Ref("main")).To(Equal(a))
		})
		It("answers missing things with ErrNotFound", func() {
			sn, _ := s.Snapshot()
			_, err := sn.Ref("nope")
			Expect(err).To(MatchError(core.ErrNotFound))
			_, err = sn.Resolve("abcd")
			Expect(err).To(MatchError(core.ErrNotFound))
			_, err = sn.Blob(core.ID{1})
			Expect(err).To(MatchError(core.ErrNotFound))
			_, err = sn.Resolve("main~x")
			Expect(err).To(HaveOccurred())
		})
	})

	Describe("Verify", func() {
		It("reports every corrupted loose object, not just the first", func() {
			// Incompressible, so the files hold the bytes as they are
			// (a compressible loose object is a zstd frame).
			big1, big2 := noise(1, 200), noise(2, 300)
			commit(core.CommitRequest{Changes: []core.Change{{Path: "b1", Data: big1}, {Path: "b2", Data: big2}}})
			for _, b := range [][]byte{big1, big2} {
				id := objects.BlobID(b)
				p := "/s/objects/" + id.String()[:2] + "/" + id.String()[2:]
				f, err := m.OpenFile(p, os.O_RDWR, 0)
				Expect(err).NotTo(HaveOccurred())
				f.WriteAt([]byte{0xff}, 10)
				f.Close()
			}
			rep, err := s.Verify(true, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(rep.Problems).To(HaveLen(2))
			// Repair so the after-each consistency check passes.
			for _, b := range [][]byte{big1, big2} {
				id := objects.BlobID(b)
				f, _ := m.OpenFile("/s/objects/"+id.String()[:2]+"/"+id.String()[2:], os.O_RDWR, 0)
				f.WriteAt(b[10:11], 10)
				f.Close()
			}
		})
	})
})

var _ = Describe("two processes on one store", Label("process"), func() {
	It("stay consistent: every commit of both is on main, in one chain", func() {
		bin, err := gexec.Build("github.com/swarmops/swarmops/core/internal/storeproc")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
		dir := filepath.Join(GinkgoT().TempDir(), "s")
		s, err := core.Create(dir, core.Options{FS: vfs.OS()})
		Expect(err).NotTo(HaveOccurred())
		s.Close()
		const each = 40
		var sessions []*gexec.Session
		for _, name := range []string{"p1", "p2"} {
			sess, err := gexec.Start(exec.Command(bin, dir, "40", name), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			sessions = append(sessions, sess)
		}
		for _, sess := range sessions {
			Eventually(sess, "60s").Should(gexec.Exit(0))
		}
		s, err = core.Open(dir, core.Options{FS: vfs.OS()})
		Expect(err).NotTo(HaveOccurred())
		defer s.Close()
		sn, _ := s.Snapshot()
		head, err := sn.Ref("main")
		Expect(err).NotTo(HaveOccurred())
		log, err := sn.Log(head, 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(log).To(HaveLen(2 * each))
		flat, _ := sn.Flatten(head)
		Expect(flat).To(HaveLen(2 * each))
		consistent(s)
	})
})
