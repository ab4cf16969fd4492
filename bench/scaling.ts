// stub
import type { Section } from './section.js';
export const scalingSection: Section<null> = { name: 'scaling', run: async () => null, render: () => [] };
