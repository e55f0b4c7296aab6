package faultfs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
)

// write creates (or truncates) name with data and optionally syncs it.
func write(m vfs.FS, name, data string, sync bool) {
	GinkgoHelper()
	f, err := m.Create(name)
	Expect(err).NotTo(HaveOccurred())
	_, err = f.Write([]byte(data))
	Expect(err).NotTo(HaveOccurred())
	if sync {
		Expect(vfs.Datasync(f)).To(Succeed())
	}
	Expect(f.Close()).To(Succeed())
}

// absent is what content returns for a missing file.
const absent = "<absent>"

// content reads name, or returns absent.
func content(m vfs.FS, name string) string {
	GinkgoHelper()
	f, err := m.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return absent
	}
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	b, err := io.ReadAll(f)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

func exists(m vfs.FS, name string) bool {
	_, err := m.Stat(name)
	return err == nil
}

var _ = Describe("the power-loss model of MemFS", func() {
	var m *faultfs.MemFS
	BeforeEach(func() {
		m = faultfs.NewMem()
		Expect(m.MkdirAll("/s", 0o755)).To(Succeed())
		Expect(m.SyncDir("/")).To(Succeed())
	})

	It("loses an unsynced write under Strict", func() {
		write(m, "/s/f", "durable", true)
		Expect(m.SyncDir("/s")).To(Succeed())
		f, err := m.OpenFile("/s/f", os.O_WRONLY, 0)
		Expect(err).NotTo(HaveOccurred())
		_, err = f.WriteAt([]byte("CHANGED"), 0)
		Expect(err).NotTo(HaveOccurred())

		c := m.CrashClone(faultfs.Strict, 1)
		Expect(content(c, "/s/f")).To(Equal("durable"))
		Expect(content(m, "/s/f")).To(Equal("CHANGED"), "the original keeps its live state")
	})

	It("keeps a synced write under Strict", func() {
		write(m, "/s/f", "durable", true)
		Expect(m.SyncDir("/s")).To(Succeed())
		Expect(content(m.CrashClone(faultfs.Strict, 1), "/s/f")).To(Equal("durable"))
	})

	It("loses a synced file whose directory entry was not synced", func() {
		write(m, "/s/f", "data", true)
		Expect(exists(m.CrashClone(faultfs.Strict, 1), "/s/f")).To(BeFalse())
		Expect(m.SyncDir("/s")).To(Succeed())
		Expect(content(m.CrashClone(faultfs.Strict, 1), "/s/f")).To(Equal("data"))
	})

	It("loses everything below a directory whose own entry was not synced", func() {
		Expect(m.Mkdir("/s/d", 0o755)).To(Succeed())
		write(m, "/s/d/f", "data", true)
		Expect(m.SyncDir("/s/d")).To(Succeed())
		Expect(exists(m.CrashClone(faultfs.Strict, 1), "/s/d")).To(BeFalse())
		Expect(m.SyncDir("/s")).To(Succeed())
		Expect(content(m.CrashClone(faultfs.Strict, 1), "/s/d/f")).To(Equal("data"))
	})

	It("makes a rename durable only after SyncDir", func() {
		write(m, "/s/old", "v1", true)
		write(m, "/s/tmp", "v2", true)
		Expect(m.SyncDir("/s")).To(Succeed())
		Expect(m.Rename("/s/tmp", "/s/old")).To(Succeed())

		c := m.CrashClone(faultfs.Strict, 1)
		Expect(content(c, "/s/old")).To(Equal("v1"))
		Expect(content(c, "/s/tmp")).To(Equal("v2"))

		Expect(m.SyncDir("/s")).To(Succeed())
		c = m.CrashClone(faultfs.Strict, 1)
		Expect(content(c, "/s/old")).To(Equal("v2"))
		Expect(exists(c, "/s/tmp")).To(BeFalse())
	})

	It("makes a rename between directories durable by a SyncDir of either", func() {
		Expect(m.Mkdir("/s/a", 0o755)).To(Succeed())
		Expect(m.Mkdir("/s/b", 0o755)).To(Succeed())
		Expect(m.SyncDir("/s")).To(Succeed())
		write(m, "/s/a/f", "x", true)
		Expect(m.SyncDir("/s/a")).To(Succeed())
		Expect(m.Rename("/s/a/f", "/s/b/g")).To(Succeed())
		c := m.CrashClone(faultfs.Strict, 1)
		Expect(exists(c, "/s/a/f")).To(BeTrue())
		Expect(exists(c, "/s/b/g")).To(BeFalse())
		Expect(m.SyncDir("/s/b")).To(Succeed())
		c = m.CrashClone(faultfs.Strict, 1)
		Expect(exists(c, "/s/a/f")).To(BeFalse())
		Expect(content(c, "/s/b/g")).To(Equal("x"))
	})

	It("makes a removal durable only after SyncDir", func() {
		write(m, "/s/f", "x", true)
		Expect(m.SyncDir("/s")).To(Succeed())
		Expect(m.Remove("/s/f")).To(Succeed())
		Expect(exists(m.CrashClone(faultfs.Strict, 1), "/s/f")).To(BeTrue())
		Expect(m.SyncDir("/s")).To(Succeed())
		Expect(exists(m.CrashClone(faultfs.Strict, 1), "/s/f")).To(BeFalse())
	})

	It("makes a link durable only after SyncDir, sharing the file", func() {
		write(m, "/s/a", "x", true)
		Expect(m.SyncDir("/s")).To(Succeed())
		Expect(m.Link("/s/a", "/s/b")).To(Succeed())
		Expect(exists(m.CrashClone(faultfs.Strict, 1), "/s/b")).To(BeFalse())
		Expect(m.SyncDir("/s")).To(Succeed())
		c := m.CrashClone(faultfs.Strict, 1)
		f, err := c.OpenFile("/s/a", os.O_WRONLY|os.O_APPEND, 0)
		Expect(err).NotTo(HaveOccurred())
		f.Write([]byte("y"))
		f.Close()
		Expect(content(c, "/s/b")).To(Equal("xy"), "both names are one file in the clone")
	})

	It("keeps data and size after Datasync but not a new file's entry", func() {
		f, err := m.Create("/s/f")
		Expect(err).NotTo(HaveOccurred())
		_, err = f.Write(bytes.Repeat([]byte("a"), 3000))
		Expect(err).NotTo(HaveOccurred())
		Expect(f.(vfs.DataSyncer).Datasync()).To(Succeed())
		Expect(exists(m.CrashClone(faultfs.Strict, 1), "/s/f")).To(BeFalse())
		Expect(m.SyncDir("/s")).To(Succeed())
		got := content(m.CrashClone(faultfs.Strict, 1), "/s/f")
		Expect(got).To(Equal(string(bytes.Repeat([]byte("a"), 3000))))
	})

	It("keeps the synced size, not a later Allocate or Truncate", func() {
		write(m, "/s/f", "0123456789", true)
		Expect(m.SyncDir("/s")).To(Succeed())
		f, err := m.OpenFile("/s/f", os.O_RDWR, 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(vfs.Allocate(f, 0, 1<<20)).To(Succeed())
		st, _ := m.CrashClone(faultfs.Strict, 1).Stat("/s/f")
		Expect(st.Size()).To(BeEquivalentTo(10))
		Expect(f.Truncate(3)).To(Succeed())
		Expect(content(m.CrashClone(faultfs.Strict, 1), "/s/f")).To(Equal("0123456789"))
		Expect(f.Sync()).To(Succeed())
		Expect(content(m.CrashClone(faultfs.Strict, 1), "/s/f")).To(Equal("012"))
	})

	It("gives power-loss clones a new boot id and process-crash clones the same", func() {
		b0, _ := m.BootID()
		bs, _ := m.CrashClone(faultfs.Strict, 1).BootID()
		bt, _ := m.CrashClone(faultfs.Torn, 1).BootID()
		bp, _ := m.CrashClone(faultfs.ProcessCrash, 1).BootID()
		Expect(bs).NotTo(Equal(b0))
		Expect(bt).NotTo(Equal(b0))
		Expect(bp).To(Equal(b0))
	})

	It("keeps unsynced state in a process-crash clone, still unsynced", func() {
		write(m, "/s/f", "unsynced", false)
		p := m.CrashClone(faultfs.ProcessCrash, 1)
		Expect(content(p, "/s/f")).To(Equal("unsynced"))
		Expect(exists(p.CrashClone(faultfs.Strict, 1), "/s/f")).To(BeFalse(),
			"a later power loss still loses what was never synced")
	})

	It("releases locks in clones", func() {
		l, err := m.Lock("/s/LOCK", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(m.SyncDir("/s")).To(Succeed())
		for _, model := range faultfs.Models() {
			l2, err := m.CrashClone(model, 1).Lock("/s/LOCK", 0)
			Expect(err).NotTo(HaveOccurred(), "model %s", model)
			Expect(l2.Unlock()).To(Succeed())
		}
		_, err = m.Lock("/s/LOCK", 0)
		Expect(err).To(MatchError(vfs.ErrBusy), "the original still holds its lock")
		Expect(l.Unlock()).To(Succeed())
	})

	It("lets the original and the clone run on independently", func() {
		write(m, "/s/f", "base", true)
		Expect(m.SyncDir("/s")).To(Succeed())
		c := m.CrashClone(faultfs.Strict, 1)
		write(c, "/s/f", "clone", true)
		write(m, "/s/g", "orig", true)
		Expect(content(m, "/s/f")).To(Equal("base"))
		Expect(exists(c, "/s/g")).To(BeFalse())
		Expect(content(c, "/s/f")).To(Equal("clone"))
	})

	Describe("Torn", func() {
		// prepare leaves 64 unsynced sectors over a synced file and three
		// unsynced directory operations.
		prepare := func() {
			write(m, "/s/f", string(bytes.Repeat([]byte{'d'}, 64*faultfs.SectorSize)), true)
			write(m, "/s/r", "renamed", true)
			Expect(m.Mkdir("/s/a", 0o755)).To(Succeed())
			Expect(m.Mkdir("/s/b", 0o755)).To(Succeed())
			write(m, "/s/a/x", "moved", true)
			Expect(m.SyncDir("/s/a")).To(Succeed())
			Expect(m.SyncDir("/s")).To(Succeed())
			f, err := m.OpenFile("/s/f", os.O_WRONLY, 0)
			Expect(err).NotTo(HaveOccurred())
			_, err = f.WriteAt(bytes.Repeat([]byte{'L'}, 64*faultfs.SectorSize), 0)
			Expect(err).NotTo(HaveOccurred())
			write(m, "/s/new1", "n1", true)
			write(m, "/s/new2", "n2", true)
			Expect(m.Rename("/s/r", "/s/r2")).To(Succeed())
			Expect(m.Rename("/s/a/x", "/s/b/y")).To(Succeed())
		}

		// fates names each sector of /s/f: Kept, Dropped, Zeroed, Garbage.
		fates := func(c *faultfs.MemFS) string {
			got := content(c, "/s/f")
			if got == absent {
				return absent
			}
			var b strings.Builder
			for s := 0; s+faultfs.SectorSize <= len(got); s += faultfs.SectorSize {
				switch sec := got[s : s+faultfs.SectorSize]; sec {
				case strings.Repeat("L", faultfs.SectorSize):
					b.WriteByte('K')
				case strings.Repeat("d", faultfs.SectorSize):
					b.WriteByte('D')
				case string(make([]byte, faultfs.SectorSize)):
					b.WriteByte('Z')
				default:
					b.WriteByte('G')
				}
			}
			return b.String()
		}

		snapshot := func(c *faultfs.MemFS) string {
			var b bytes.Buffer
			b.WriteString(fates(c) + ";")
			for _, n := range []string{"/s/new1", "/s/new2", "/s/r", "/s/r2", "/s/a/x", "/s/b/y"} {
				b.WriteString(n + "=" + content(c, n) + ";")
			}
			return b.String()
		}

		It("is reproducible from the seed", func() {
			prepare()
			Expect(snapshot(m.CrashClone(faultfs.Torn, 7))).To(Equal(snapshot(m.CrashClone(faultfs.Torn, 7))))
			Expect(snapshot(m.CrashClone(faultfs.Torn, 7))).NotTo(Equal(snapshot(m.CrashClone(faultfs.Torn, 8))))
		})

		It("gives each unsynced sector one of the four fates and keeps synced state", func() {
			prepare()
			seen := map[rune]int{}
			for seed := int64(0); seed < 20; seed++ {
				got := fates(m.CrashClone(faultfs.Torn, seed))
				Expect(got).To(HaveLen(64), "seed %d: the synced entry and size survive", seed)
				for _, f := range got {
					seen[f]++
				}
			}
			Expect(seen).To(HaveLen(4), "fates seen: %v", seen)
		})

		It("keeps or drops each directory operation, and a rename atomically", func() {
			prepare()
			seen := map[string]bool{}
			for seed := int64(0); seed < 40; seed++ {
				c := m.CrashClone(faultfs.Torn, seed)
				r, r2 := exists(c, "/s/r"), exists(c, "/s/r2")
				Expect(r != r2).To(BeTrue(), "seed %d: rename left r=%v r2=%v", seed, r, r2)
				x, y := exists(c, "/s/a/x"), exists(c, "/s/b/y")
				Expect(x != y).To(BeTrue(), "seed %d: rename between directories left x=%v y=%v", seed, x, y)
				seen["r2"] = seen["r2"] || r2
				seen["r"] = seen["r"] || r
				seen["new1"] = seen["new1"] || exists(c, "/s/new1")
				seen["no new1"] = seen["no new1"] || !exists(c, "/s/new1")
			}
			Expect(seen).To(HaveLen(4), "outcomes seen: %v", seen)
		})

		It("keeps exactly the synced state when nothing is unsynced", func() {
			write(m, "/s/f", "synced", true)
			Expect(m.SyncDir("/s")).To(Succeed())
			for seed := int64(0); seed < 10; seed++ {
				Expect(content(m.CrashClone(faultfs.Torn, seed), "/s/f")).To(Equal("synced"))
			}
		})
	})

	It("parses model names and rejects others", func() {
		for _, model := range faultfs.Models() {
			got, err := faultfs.ParseModel(model.String())
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(model))
		}
		_, err := faultfs.ParseModel("Strict ")
		Expect(err).To(MatchError(ContainSubstring(`unknown crash model "Strict "`)))
	})
})
