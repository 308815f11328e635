"""The paper's model: its configuration, its modules (sections 3.1-3.5), its tokens (section 5.1) and the search
that turns it into a translator (section 6.1)."""
