//! An action selector's choice of a group member, as BMv2 makes it
//! (`ActionProfile::choose_from_group`, `GroupMgr::get_from_hash`): the
//! selector's hash over its fields ([`super::hash`]) is cut to 32 bits
//! (BMv2's `hash_t` is an unsigned int) and, modulo the group's size,
//! indexes the group's members in ascending member-handle order.

/// The index, in a group of `size` members sorted by handle, of the member
/// a packet whose selector hash is `hash` runs (`size` > 0: BMv2 refuses
/// entries pointing at an empty group).
pub fn choose(hash: u64, size: usize) -> usize {
    (hash as u32 as usize) % size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_cut_to_32_bits_before_the_modulo() {
        assert_eq!(choose(7, 3), 1);
        // 2^32 + 1: as 32 bits it is 1; as 64 bits, 2^32 + 1 mod 3 = 2
        assert_eq!(choose((1u64 << 32) + 1, 3), 1);
        assert_eq!(choose(u64::MAX, 1), 0);
    }
}
