package pi

import "sort"

// node is one entry of the tree, by its index among the file's entries.
type node struct {
	id, parent string
}

// branch is a root-to-leaf path of the tree that is not the main path.
type branch struct {
	path []int // indexes, root first
	// at is the number of leading path entries it shares with the main
	// path (0: none, the branch has a root of its own).
	at int
}

// pathTo is the path from the root to nodes[leaf], following parents
// that exist (a missing parent makes its child a root, as pi does).
func pathTo(nodes []node, byID map[string]int, leaf int) []int {
	var rev []int
	seen := map[int]bool{}
	for i, ok := leaf, true; ok && !seen[i]; i, ok = byID[nodes[i].parent] {
		seen[i] = true
		rev = append(rev, i)
		if nodes[i].parent == "" {
			break
		}
	}
	for l, r := 0, len(rev)-1; l < r; l, r = l+1, r-1 {
		rev[l], rev[r] = rev[r], rev[l]
	}
	return rev
}

// split returns the main path (root to the last entry) and every other
// leaf's path, ordered by the file position of the branch's first entry
// off the main path.
func split(nodes []node) (main []int, branches []branch) {
	if len(nodes) == 0 {
		return nil, nil
	}
	byID := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if _, dup := byID[n.id]; !dup {
			byID[n.id] = i
		}
	}
	main = pathTo(nodes, byID, len(nodes)-1)
	onMain := make(map[int]bool, len(main))
	for _, i := range main {
		onMain[i] = true
	}
	hasChild := make(map[int]bool)
	for _, n := range nodes {
		if p, ok := byID[n.parent]; ok {
			hasChild[p] = true
		}
	}
	type keyed struct {
		branch
		first, leaf int
	}
	var ks []keyed
	for i := range nodes {
		if onMain[i] || hasChild[i] || byID[nodes[i].id] != i {
			continue
		}
		p := pathTo(nodes, byID, i)
		at := 0
		for at < len(p) && at < len(main) && p[at] == main[at] {
			at++
		}
		ks = append(ks, keyed{branch{path: p, at: at}, p[at], i})
	}
	sort.Slice(ks, func(a, b int) bool {
		if ks[a].first != ks[b].first {
			return ks[a].first < ks[b].first
		}
		return ks[a].leaf < ks[b].leaf
	})
	for _, k := range ks {
		branches = append(branches, k.branch)
	}
	return main, branches
}
