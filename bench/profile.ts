// stub
import type { Section } from './section.js';
export const profileSection: Section<null> = { name: 'profile', run: async () => null, render: () => [] };
