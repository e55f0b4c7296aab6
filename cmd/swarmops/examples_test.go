package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The scripts in docs/examples are what the guide tells orchestrator
// authors to run; these specs run them against the binary under test.
var _ = Describe("the guide's example scripts", func() {
	// script runs docs/examples/NAME with the binary under test first on
	// PATH, in a fresh directory, and returns its combined output.
	script := func(name string, args ...string) string {
		GinkgoHelper()
		dir := GinkgoT().TempDir()
		path, err := filepath.Abs(filepath.Join("..", "..", "docs", "examples", name))
		Expect(err).NotTo(HaveOccurred())
		c := exec.Command("sh", append([]string{path}, args...)...)
		c.Dir = dir
		c.Env = append(baseEnv(),
			"PATH="+filepath.Dir(binPath)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"SWARM_DIR="+filepath.Join(dir, "swarm"))
		out, err := c.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s: %s", name, out)
		return string(out)
	}

	It("runs N agents in work trees through one server, with a watcher on main (swarm.sh)", func() {
		out := script("swarm.sh", "8")
		Expect(out).To(ContainSubstring("swarm.sh: 8 agents landed; main moved 9 times"))
	})

	It("lands every agent's branch on main (agents.sh, as the guide prints it)", func() {
		out := script("agents.sh", "8")
		var files []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.Contains(l, "agent") && strings.HasSuffix(l, ".txt") {
				files = append(files, l)
			}
		}
		Expect(files).To(HaveLen(8), "agents.sh printed:\n%s", out)

		guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "guide.md"))
		Expect(err).NotTo(HaveOccurred())
		file, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "agents.sh"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(guide)).To(ContainSubstring("```sh\n"+string(file)+"```\n"),
			"docs/guide.md must print docs/examples/agents.sh as it is")
	})
})
