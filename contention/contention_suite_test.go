package contention

import (
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

func TestContention(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Contention Suite")
}

var (
	// knobs size every spec; a malformed variable fails the suite before
	// anything runs.
	knobs Knobs
	// writerBin is the helper process and swarmopsBin the CLI, each built
	// once per suite run. Only the suite removes build artifacts: gexec's
	// cleanup removes every binary it built, so a container that cleaned up
	// after itself would take the others' binaries with it.
	writerBin, swarmopsBin string
)

var _ = BeforeSuite(func() {
	var err error
	knobs, err = KnobsFromEnv()
	if err != nil {
		Fail(err.Error())
	}
	GinkgoWriter.Printf("knobs: %+v\n", knobs)
	probe("at start")
	writerBin, err = gexec.Build("github.com/swarmops/swarmops/contention/cmd/writer")
	Expect(err).NotTo(HaveOccurred())
	swarmopsBin, err = gexec.Build("github.com/swarmops/swarmops/cmd/swarmops")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(gexec.CleanupBuildArtifacts)
})

var _ = AfterSuite(func() { probe("at end") })

// probe records the machine's state beside the figures: load and a raw
// fdatasync (median of 40) on the filesystem the stores live on.
func probe(when string) {
	d, err := FdatasyncProbe(os.TempDir(), 40)
	Expect(err).NotTo(HaveOccurred())
	msg := fmt.Sprintf("%s: load %s, raw fdatasync of a 128-byte overwrite %s (median of 40)", when, LoadAvg(), d.Round(time.Microsecond))
	GinkgoWriter.Println(msg)
	AddReportEntry("machine "+when, msg)
}
