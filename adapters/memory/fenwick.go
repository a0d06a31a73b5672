package memory

// fenwick counts the waiting users by entry sequence number (a Fenwick tree): a user's rank is
// how many waiting users entered before them, in O(log n). It grows by doubling as sequence
// numbers grow, rebuilding from the waiting users.
type fenwick struct {
	tree []int // 1-based
}

// add adds d at position i (≥ 1); members is every waiting user's position after the change,
// used to rebuild when i lies beyond the tree.
func (f *fenwick) add(i, d int, members map[string]int) {
	if i >= len(f.tree) {
		f.rebuild(max(2*len(f.tree), i+1, 64), members)
		return
	}
	for ; i < len(f.tree); i += i & -i {
		f.tree[i] += d
	}
}

// prefix is the sum over positions 1..i.
func (f *fenwick) prefix(i int) int {
	i = min(i, len(f.tree)-1)
	sum := 0
	for ; i > 0; i -= i & -i {
		sum += f.tree[i]
	}
	return sum
}

// rebuild makes a tree of size n holding 1 at every member's position, in O(n).
func (f *fenwick) rebuild(n int, members map[string]int) {
	f.tree = make([]int, n)
	for _, i := range members {
		f.tree[i]++
	}
	for i := 1; i < n; i++ {
		if parent := i + i&-i; parent < n {
			f.tree[parent] += f.tree[i]
		}
	}
}
