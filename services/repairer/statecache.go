package repairer

import "github.com/hashicorp/golang-lru/v2"

// newStateCache is the cache of folded states kept between checks. New
// defaults size to a positive number, the one thing lru.New refuses.
func newStateCache(size int) *lru.Cache[string, folded] {
	c, err := lru.New[string, folded](size)
	if err != nil {
		panic("repairer: state cache: " + err.Error())
	}
	return c
}
