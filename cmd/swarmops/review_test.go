package main

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// What a reviewer reads: content diffs, short logs, refs by prefix.
var _ = Describe("reviewing changes", func() {
	var e *env
	BeforeEach(func() {
		e = newStoreEnv()
		e.commit("put f.txt = \"one\\ntwo\\nthree\\n\"\n", "--advance", "main", "-m", "first line\n\nbody")
		e.commit("put f.txt = \"one\\n2\\nthree\\n\"\nput bin = \"\\x00\\x01\"\n", "--advance", "main", "-m", "second")
	})

	It("diff and show print unified diffs, --stat and --name-status, and JSON hunks", func() {
		r := e.run("", "diff", "main~1", "main")
		Expect(r.Exit).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(ContainSubstring("diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"))
		Expect(r.Stdout).To(ContainSubstring("Binary files a/bin and b/bin differ"))
		Expect(e.run("", "diff", "main~1", "main", "--name-status").Stdout).To(Equal("A\tbin\nM\tf.txt\n"))
		Expect(e.run("", "show", "main", "--stat").Stdout).To(ContainSubstring(" f.txt | 2 +-\n"))
		d := e.ok("", "diff", "main~1", "main").([]any)
		f := d[1].(map[string]any)
		Expect(f["added"]).To(BeNumerically("==", 1))
		Expect(f["hunks"]).To(HaveLen(1))
		Expect(e.run("", "diff", "main~1", "main", "-U", "-1", "--json").Err()["code"]).To(Equal("E_USAGE"))
	})

	It("diff --work shows a work tree's changes with their content", func() {
		wt := filepath.Join(e.root, "wt")
		e.ok("", "checkout", "main", wt)
		Expect(os.WriteFile(filepath.Join(wt, "f.txt"), []byte("one\n2\nthree\nfour\n"), 0o644)).To(Succeed())
		r := e.run("", "diff", "--work", wt)
		Expect(r.Exit).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(ContainSubstring("@@ -1,3 +1,4 @@\n one\n 2\n three\n+four\n"))
	})

	It("log --oneline and --format print one line a changeset, and an unknown placeholder is refused", func() {
		r := e.run("", "log", "--oneline")
		Expect(r.Stdout).To(MatchRegexp(`^[0-9a-f]{12} second\n[0-9a-f]{12} first line\n$`))
		Expect(e.run("", "log", "--format", "%s|%g", "-n", "1").Stdout).To(Equal("second|2\n"))
		Expect(e.run("", "log", "--format", "%z", "--json").Err()["code"]).To(Equal("E_USAGE"))
	})

	It("ref list takes a prefix", func() {
		e.ok("", "ref", "create", "agent/1", "main")
		e.ok("", "ref", "create", "agent/2", "main")
		Expect(e.ok("", "ref", "list", "agent/")).To(HaveLen(2))
		Expect(e.ok("", "ref", "list")).To(HaveLen(3))
	})

	It("ls, ref list, ref log and ref list --protected print one line an entry", func() {
		e.commit("put d/g.txt = \"g\\n\"\n", "--advance", "main", "-m", "third")
		e.ok("", "ref", "create", "agent/1", "main~1")
		e.ok("", "ref", "protect", "main")
		Expect(e.run("", "ls", "main").Stdout).To(MatchRegexp(`^100644 [0-9a-f]{64} bin\n040000 [0-9a-f]{64} d/\n100644 [0-9a-f]{64} f\.txt\n$`))
		Expect(e.run("", "ref", "list").Stdout).To(MatchRegexp(`^[0-9a-f]{64} agent/1\n[0-9a-f]{64} main\n$`))
		Expect(e.run("", "ref", "log", "agent/1").Stdout).To(MatchRegexp(`^\d+ \S+ \(none\) -> [0-9a-f]{64}\n$`))
		Expect(e.run("", "ref", "list", "--protected").Stdout).To(Equal("main\n"))
	})
})
