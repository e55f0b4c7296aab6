package main

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// These specs make the store unwritable with SWARMOPS_TEST_READ_ONLY (see
// crashFS), because the suite may run as root, whom file modes do not
// stop. Without the read-only fallback of the state file, every read
// below fails with E_READ_ONLY ("open state: ... read-only file system").
var _ = Describe("a store without write access", func() {
	var e *env
	var m1, m2, side string
	BeforeEach(func() {
		if throughServer {
			Skip("the server opened the store with write access; these specs are about a process that has none")
		}
		e = newStoreEnv()
		m1 = e.commit("put a.txt = \"a\\n\"\n", "--advance", "main", "--create", "-m", "first")
		m2 = e.commit("put b/c.txt = \"c\\n\"\n", "--parent", "main", "--advance", "main", "-m", "second")
		side = e.commit("put s.txt = \"s\\n\"\n", "--parent", m1, "-m", "side")
	})

	reads := func() [][]string {
		return [][]string{
			{"log", "main"}, {"show", "main"}, {"cat", "main:a.txt"}, {"ls", "main"},
			{"diff", m1, m2}, {"ref", "get", "main"}, {"ref", "list"}, {"ref", "log", "main"},
			{"op", "log"}, {"verify"}, {"verify", "--deep"}, {"info"},
		}
	}

	for _, errno := range []string{"erofs", "eacces"} {
		It("answers every read and refuses every write with E_READ_ONLY and a hint ("+errno+")", func() {
			e.extra = []string{"SWARMOPS_TEST_READ_ONLY=" + errno}
			before := e.journalState()
			for _, args := range reads() {
				e.ok("", args...)
			}
			Expect(e.ok("", "ref", "get", "main")).To(HaveKeyWithValue("id", m2))
			// A reader checks a revision out into a tree of its own; the
			// tree holds no lease, and says so.
			tree := filepath.Join(e.root, "look-"+errno)
			r := e.run("", "checkout", "main", tree)
			Expect(r.Exit).To(Equal(0), r.Stderr)
			Expect(r.Stderr).To(ContainSubstring("read-only"))
			Expect(filepath.Join(tree, "a.txt")).To(BeAnExistingFile())
			for _, args := range [][]string{
				{"commit", "-F", "-", "--parent", "main", "--advance", "main"},
				{"ref", "set", "main", m1, "--expect", "main"},
				{"ref", "create", "side", "main"},
				{"ref", "delete", "main"},
				{"ref", "protect", "main"},
				{"land", side, "--onto", "main"},
				{"undo", "2"},
				{"recover"},
			} {
				er := e.run("put d.txt = \"d\\n\"\n", append(args, "--json")...).Err()
				Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_READ_ONLY"),
					HaveKeyWithValue("hint", ContainSubstring("write"))), "%v", args)
			}
			Expect(e.journalState()).To(Equal(before))
		})
	}

	It("says a store needing recovery needs write access to recover, and reads once a writer recovered it", func() {
		Expect(os.WriteFile(filepath.Join(e.store, "state"), nil, 0o644)).To(Succeed())
		e.extra = []string{"SWARMOPS_TEST_READ_ONLY=erofs"}
		for _, args := range reads() {
			er := e.run("", append(args, "--json")...).Err()
			Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_READ_ONLY"),
				HaveKeyWithValue("message", ContainSubstring("needs recovery")),
				HaveKeyWithValue("hint", ContainSubstring("swarmops recover"))), "%v", args)
		}
		e.extra = nil
		e.ok("", "recover")
		e.extra = []string{"SWARMOPS_TEST_READ_ONLY=erofs"}
		Expect(e.ok("", "ref", "get", "main")).To(HaveKeyWithValue("id", m2))
	})

	It("refuses a malformed SWARMOPS_TEST_READ_ONLY with E_USAGE", func() {
		e.extra = []string{"SWARMOPS_TEST_READ_ONLY=yes"}
		Expect(e.run("", "info", "--json").Err()).To(HaveKeyWithValue("code", "E_USAGE"))
	})
})
