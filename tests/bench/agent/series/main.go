// SPDX-License-Identifier: Apache-2.0
// series writes a run of cumulative snapshots of one process, for the
// scale benchmark: a fixture serves them in turn, so every scrape of
// memory, mutex and block brings a real delta.
//
//	series -out DIR [-n 8] [-depth 14] [-prefix 12] [-active 20]
//
// writes DIR/{allocs,mutex,block}.1 .. .N: the heap from 2^depth distinct
// call paths (depth 14 gives about 19,000 stacks with the runtime's own,
// a few hundred KB of gzip, as a type-checking service has), where after
// the first snapshot `active` percent of the paths allocate again; mutex
// and block from goroutines that contend on a few locks in turn.
//
// Standard library only: GO111MODULE=off go build.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
)

var sink []byte

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

// heapRound allocates from every path on the first round, then from
// `active` percent of them, a different share each round, below `pre`
// frames of a common prefix (a service's stacks are deep).
func heapRound(depth, pre, round, active int) {
	prefix(pre, func() {
		for p := uint32(0); p < 1<<depth; p++ {
			if round > 0 && int((p+uint32(round)*37)%100) >= active {
				continue
			}
			left(depth, p, 64+int(p%7)*16)
		}
	})
}

// contend makes goroutines wait on a few mutexes and channels, so mutex
// and block profiles grow a little every round.
func contend(round int) {
	var locks [4]sync.Mutex
	var wg sync.WaitGroup
	ch := make(chan int)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				l := &locks[(g+i+round)%len(locks)]
				l.Lock()
				time.Sleep(20 * time.Microsecond)
				l.Unlock()
			}
			ch <- g
		}(g)
	}
	for g := 0; g < 8; g++ {
		time.Sleep(50 * time.Microsecond)
		<-ch
	}
	wg.Wait()
}

func write(dir, kind string, n int) {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s.%d", kind, n)))
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.Lookup(kind).WriteTo(f, 0); err != nil {
		log.Fatal(err)
	}
	f.Close()
}

func main() {
	out := flag.String("out", ".", "output directory")
	n := flag.Int("n", 8, "snapshots")
	depth := flag.Int("depth", 14, "2^depth allocation paths")
	pre := flag.Int("prefix", 12, "frames of common prefix")
	active := flag.Int("active", 20, "percent of the paths that allocate again each round")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	runtime.MemProfileRate = 1
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	for round := 0; round < *n; round++ {
		heapRound(*depth, *pre, round, *active)
		contend(round)
		runtime.GC()
		for _, k := range []string{"allocs", "mutex", "block"} {
			write(*out, k, round+1)
		}
	}
}
