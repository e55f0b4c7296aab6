package main

import (
	"os"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("a server whose store moves or whose terminal closes", func() {
	BeforeEach(func() {
		if throughServer {
			Skip("starts and stops its own server")
		}
	})

	It("answers E_UNAVAILABLE and stops when its store is moved away and a new one made at the path; both stores keep their commits", func() {
		e := newStoreEnv()
		first := e.commit("put f = \"1\\n\"\n", "--advance", "main", "-m", "one")
		c, errb := e.startServer()
		moved := e.store + "-moved"
		Expect(os.Rename(e.store, moved)).To(Succeed())
		e.ok("", "init")
		fresh := e.commit("put g = \"new\\n\"\n", "--advance", "main", "-m", "fresh")

		// The moved store's socket moved with it: this reaches the old
		// server, which must not write by its old path.
		r := e.run("put f = \"2\\n\"\n", "--store", moved, "commit", "-F", "-", "--parent", first, "--advance", "main", "--json")
		Expect(r.Exit).To(Or(Equal(0), Equal(kindGone.Exit)), r.Stdout+r.Stderr)
		if r.Exit != 0 {
			Expect(r.Err()).To(HaveKeyWithValue("retryable", true))
			Eventually(func() int {
				return e.run("put f = \"2\\n\"\n", "--store", moved, "commit", "-F", "-", "--parent", first, "--advance", "main").Exit
			}, 10*time.Second, 100*time.Millisecond).Should(Equal(0))
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		Eventually(done, 10*time.Second).Should(Receive(), "the moved server kept running: %s", errb.String())

		for store, head := range map[string]string{moved: "", e.store: fresh} {
			e.ok("", "--store", store, "verify", "--deep")
			got := e.ok("", "--store", store, "ref", "get", "main").(map[string]any)["id"]
			if head != "" {
				Expect(got).To(Equal(head))
			}
		}
		Expect(e.run("", "--store", moved, "cat", "main:f").Stdout).To(Equal("2\n"))
		Expect(e.run("", "cat", "main:g").Stdout).To(Equal("new\n"))
	})

	It("stops cleanly on a hangup, leaving no socket or lock", func() {
		e := newStoreEnv()
		c, errb := e.startServer()
		Expect(c.Process.Signal(syscall.SIGHUP)).To(Succeed())
		Expect(c.Wait()).To(Succeed(), errb.String())
		for _, name := range []string{"serve.sock", "serve.lock"} {
			Expect(filepath.Join(e.store, name)).NotTo(BeAnExistingFile())
		}
	})
})
