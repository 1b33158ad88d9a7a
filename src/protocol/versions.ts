/** Protocol numbers where a packet layout Portal reads or writes changed (release in the name, number in the value). */
export const PV_1_8 = 47
export const PV_1_12_2 = 340
export const PV_1_13 = 393
export const PV_1_16 = 735
export const PV_1_19 = 759
export const PV_1_19_1 = 760
export const PV_1_19_3 = 761
export const PV_1_20_2 = 764
export const PV_1_20_3 = 765
export const PV_1_20_5 = 766
export const PV_1_21_2 = 768
