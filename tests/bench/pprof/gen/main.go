// SPDX-License-Identifier: Apache-2.0
// gen writes pairs of consecutive profiles for the pprof benchmark.
//
//	gen -mode std -out DIR   heap/mutex/block pairs from standard-library
//	                         workloads (json, regexp, flate, template, sort,
//	                         sync), snapshotted twice from one process
//	gen -mode big -out DIR   a heap pair with 2^depth distinct stacks
//	                         (call paths through two recursive functions;
//	                         -depth 17 -prefix 10 gives 131k stacks, ~10 MB;
//	                         -active 10: one path in ten allocates again
//	                         before the second snapshot)
//	gen -mode wide -out DIR  a heap pair with -paths stacks over tens of
//	                         thousands of locations, as a large service
//	                         has: the call graph is wide_gen.go, written
//	                         next to this file by bench_pprof.py (each
//	                         call site is a location, and Go cannot make
//	                         call sites at run time); every stack
//	                         allocates again before the second snapshot
//	gen -mode typecheck -out DIR
//	                         a heap pair from a real program: go/types
//	                         type-checks the standard library from source
//	                         (every package under GOROOT/src but cmd,
//	                         vendor and testdata), snapshotted after each
//	                         of -rounds passes (2: one pair), each with a
//	                         fresh importer, as a service doing the same
//	                         work between two scrapes; sampled every -rate
//	                         bytes, its stacks are those of a large Go
//	                         service's heap (thousands of functions, deep
//	                         recursion)
//
// Standard library only: GO111MODULE=off go build.
package main

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"flag"
	"io/fs"
	"fmt"
	"go/build"
	"go/importer"
	"go/token"
	"go/types"
	"log"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"text/template"
	"time"
)

var sink []byte

func write(dir, name string) {
	runtime.GC()
	runtime.GC()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		log.Fatal(err)
	}
	kind := strings.SplitN(name, ".", 2)[0]
	if kind == "heap" {
		kind = "allocs"
	}
	if err := pprof.Lookup(kind).WriteTo(f, 0); err != nil {
		log.Fatal(err)
	}
	f.Close()
}

type record struct {
	Name  string            `json:"name"`
	Tags  []string          `json:"tags"`
	Attrs map[string]string `json:"attrs"`
	N     int               `json:"n"`
}

func stdWork(rounds int) {
	re := regexp.MustCompile(`(\w+)@(\w+)\.(com|org|net)`)
	tmpl := template.Must(template.New("t").Parse("{{range .}}{{.Name}}={{.N}};{{end}}"))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				recs := make([]record, 50)
				for j := range recs {
					recs[j] = record{Name: fmt.Sprintf("r%d-%d", g, j), N: i * j,
						Tags:  []string{"a", strings.Repeat("b", j%7)},
						Attrs: map[string]string{"k": fmt.Sprint(j)}}
				}
				data, _ := json.Marshal(recs)
				var back []record
				json.Unmarshal(data, &back)
				sort.Slice(back, func(a, b int) bool { return back[a].N > back[b].N })
				var buf bytes.Buffer
				w, _ := flate.NewWriter(&buf, 1+i%9)
				w.Write(data)
				w.Close()
				re.FindAllStringSubmatch("x@y.com a@b.org c@d.net "+string(data[:64]), -1)
				var out bytes.Buffer
				tmpl.Execute(&out, back)
				mu.Lock()
				sink = out.Bytes()
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
}

//go:noinline
func left(depth int, path uint32, size int) {
	if depth == 0 {
		sink = make([]byte, size)
		return
	}
	if path&1 == 0 {
		left(depth-1, path>>1, size)
	} else {
		right(depth-1, path>>1, size)
	}
}

//go:noinline
func right(depth int, path uint32, size int) {
	if depth == 0 {
		sink = make([]byte, size)
		return
	}
	if path&1 == 0 {
		left(depth-1, path>>1, size)
	} else {
		right(depth-1, path>>1, size)
	}
}

//go:noinline
func prefix(n int, f func()) {
	if n == 0 {
		f()
		return
	}
	prefix(n-1, f)
}

// bigWork allocates from 2^depth distinct call paths, below `pre` frames
// of a common prefix (which only lengthens every stack). After the first
// round only `active` percent of the paths allocate again.
func bigWork(depth, pre, round, active int) {
	prefix(pre, func() {
		for p := uint32(0); p < 1<<depth; p++ {
			if round > 0 && int(p%100) >= active {
				continue
			}
			for k := 0; k <= round; k++ {
				left(depth, p, 64)
			}
		}
	})
}

// wideRoots are the entry points of the generated call graph; empty when
// gen is built without wide_gen.go.
var wideRoots []func(path uint64, size int)

func wideWork(paths []uint64, round int) {
	for _, p := range paths {
		for k := 0; k <= round; k++ {
			wideRoots[p%uint64(len(wideRoots))](p, 64)
		}
	}
}

// stdPackages lists the import paths of GOROOT/src, sorted, without cmd,
// vendored, internal-only test data and the packages that need cgo.
func stdPackages() []string {
	root, err := filepath.EvalSymlinks(filepath.Join(runtime.GOROOT(), "src"))
	if err != nil {
		log.Fatal(err)
	}
	var pkgs []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		base := d.Name()
		if rel == "cmd" || base == "testdata" || base == "vendor" || strings.HasPrefix(base, ".") {
			return filepath.SkipDir
		}
		if rel != "." {
			if p, err := build.Default.ImportDir(path, 0); err == nil && p.Name != "main" {
				pkgs = append(pkgs, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	sort.Strings(pkgs)
	return pkgs
}

// typecheck type-checks each package from source; the importer caches
// what it checked, so each package is checked once per importer.
func typecheck(imp types.Importer, pkgs []string) int {
	ok := 0
	for _, p := range pkgs {
		if _, err := imp.Import(p); err == nil {
			ok++
		}
	}
	return ok
}

func main() {
	mode := flag.String("mode", "std", "std, big, wide or typecheck")
	nPaths := flag.Int("paths", 120000, "wide: call paths, one stack each")
	depth := flag.Int("depth", 17, "big: 2^depth call paths")
	pre := flag.Int("prefix", 10, "big: frames of common prefix")
	active := flag.Int("active", 100, "big: percent of the paths that allocate again before the second snapshot")
	rate := flag.Int("rate", 512*1024, "typecheck: runtime.MemProfileRate")
	rounds := flag.Int("rounds", 2, "typecheck: passes, one snapshot after each")
	out := flag.String("out", ".", "output directory")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	switch *mode {
	case "std":
		runtime.MemProfileRate = 1
		runtime.SetMutexProfileFraction(2)
		runtime.SetBlockProfileRate(20000)
		stdWork(300)
		for _, k := range []string{"heap", "mutex", "block"} {
			write(*out, k+".1.pb.gz")
		}
		time.Sleep(10 * time.Millisecond)
		stdWork(300)
		for _, k := range []string{"heap", "mutex", "block"} {
			write(*out, k+".2.pb.gz")
		}
	case "big":
		runtime.MemProfileRate = 1
		// One call site, so both snapshots see the same stacks.
		for round := 0; round < 2; round++ {
			bigWork(*depth, *pre, round, *active)
			write(*out, fmt.Sprintf("heap.%d.pb.gz", round+1))
		}
	case "wide":
		if len(wideRoots) == 0 {
			log.Fatal("wide: gen was built without wide_gen.go (see bench_pprof.py)")
		}
		runtime.MemProfileRate = 1
		r := rand.New(rand.NewSource(1))
		paths := make([]uint64, *nPaths)
		for i := range paths {
			paths[i] = r.Uint64()
		}
		for round := 0; round < 2; round++ {
			wideWork(paths, round)
			write(*out, fmt.Sprintf("heap.%d.pb.gz", round+1))
		}
	case "typecheck":
		runtime.MemProfileRate = *rate
		build.Default.CgoEnabled = false
		pkgs := stdPackages()
		for round := 0; round < *rounds; round++ {
			imp := importer.ForCompiler(token.NewFileSet(), "source", nil)
			n := typecheck(imp, pkgs)
			write(*out, fmt.Sprintf("heap.%d.pb.gz", round+1))
			log.Printf("typecheck: %d of %d packages checked", n, len(pkgs))
		}
	default:
		log.Fatalf("unknown mode %q", *mode)
	}
}
